"""Helpers shared by the test tiers (imported by the tests, never from conftest)."""
