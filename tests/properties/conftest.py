"""Loads the Hypothesis profile named by ``DISTLOCK_PROFILE`` (see ``profiles.py``)."""

from __future__ import annotations

from hypothesis import settings

from tests.properties import profiles

settings.load_profile(profiles.PROFILE)
