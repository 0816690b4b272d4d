"""The build environment: made from the listed variables only, ccache in depend mode unless the
user chose."""

import pytest

from orchestrator.buildenv import clean_env

pytestmark = pytest.mark.unit


def test_only_listed_variables_pass_and_never_a_credential():
    env = clean_env({"GGML_X": "1"}, {"PATH": "/bin", "GITHUB_TOKEN": "t", "CCACHE_DIR": "/c"})
    assert env["PATH"] == "/bin" and env["CCACHE_DIR"] == "/c" and env["GGML_X"] == "1"
    assert "GITHUB_TOKEN" not in env


def test_ccache_runs_in_depend_mode_unless_the_user_set_it():
    # a cold miss then runs no preprocessor: a first build with ccache costs what one without does
    assert clean_env(environ={"PATH": "/bin"})["CCACHE_DEPEND"] == "1"
    assert clean_env(environ={"CCACHE_DEPEND": "0"})["CCACHE_DEPEND"] == "0"
    assert "CCACHE_DEPEND" not in clean_env(environ={"CCACHE_NODEPEND": "1"})


def test_ccache_may_cache_a_compile_with_a_precompiled_header_the_users_sloppiness_kept():
    assert clean_env(environ={})["CCACHE_SLOPPINESS"] == "pch_defines,time_macros"
    env = clean_env(environ={"CCACHE_SLOPPINESS": "include_file_mtime time_macros"})
    assert env["CCACHE_SLOPPINESS"] == "include_file_mtime,time_macros,pch_defines"
