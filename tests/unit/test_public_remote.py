"""A remote URL as a record keeps it (a topic's origin, a pin, a git source's provenance): no
credentials whatever the URL's shape, no local folder in a topic's origin."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.pins import public_url
from orchestrator.urls import public_remote, strip_credentials


@pytest.mark.parametrize(
    "url, shown",
    [
        (
            "https://user:s3cret@example.org/fork/llama.cpp.git",
            "https://example.org/fork/llama.cpp.git",
        ),
        ("https://u:pa/ss@host.org/x.git", "https://host.org/x.git"),  # a '/' in the password
        ("https://u:pa/ss?x@host/r", "https://host/r"),
        ("https://u:p@ss@h/r", "https://h/r"),  # an '@' in the password
        ("https://ghp_abc@github.com/o/r", "https://github.com/o/r"),  # a token as the user
        ("ssh://git@h:22/r", "ssh://h:22/r"),
        ("https://h/r.git?token=abc&x=1#frag", "https://h/r.git?x=1"),
        ("https://h/r?access_token=1", "https://h/r"),
        ("https://h/r?private_token=1&sig=2&X-Api-Key=3", "https://h/r"),
        ("https://host/a@b", "https://host/a@b"),  # a path with '@': no userinfo
        # user:password or host:port? settled for secrecy
        ("https://host:8080/a@b", "https://b"),
        ("git@github.com:o/r.git", "git@github.com:o/r.git"),
    ],
)
def test_credentials_never_kept(url, shown):
    assert public_remote(url) == shown
    assert strip_credentials(url) == shown == public_url(url)


@pytest.mark.parametrize("url", ["/home/me/fork", "./fork", "file:///x", "C:\\x", "", "a b"])
def test_a_local_folder_is_no_origin(url):
    assert public_remote(url) is None


def test_a_local_path_stays_a_pin():
    assert public_url("/home/me/fork") == "/home/me/fork"


@given(
    user=st.text("abcxyz019", min_size=1, max_size=8),
    secret=st.text("abcXYZ019/:@?#_-.~", min_size=4, max_size=16).filter(
        lambda s: any(c.isalpha() for c in s)
    ),
)
def test_no_password_survives(user, secret):
    url = f"https://{user}:{secret}@example.org/o/r.git"
    out = public_remote(url) or ""
    assert f"{user}:{secret}" not in out and not out.startswith(f"https://{user}:")
