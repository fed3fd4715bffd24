"""`rofmd doctor`'s QQ compat line: off, on, and a Derpyu whitelist left unpatched
(which fails with the one thing to do)."""

from __future__ import annotations

from rofmd.cli.doctor import check_compat


def test_off_and_plain_on_pass() -> None:
    off = check_compat({"mode": "auto", "active": False, "plugins": [], "error": "no profile"})
    assert off.ok and "off" in off.detail and "no profile" in off.detail
    onebot = check_compat({"mode": "auto", "active": True, "plugins": ["dsh-onebot-qq"]})
    assert onebot.ok and "dsh-onebot-qq" in onebot.detail


def test_derpyu_patched_passes_and_unpatched_fails_with_a_hint() -> None:
    base = {"mode": "auto", "active": True, "plugins": ["derpyu-qq-bridge"]}
    assert check_compat({**base, "derpyuPatched": True, "patch": "already"}).ok
    disabled = check_compat({**base, "derpyuPatched": False, "patch": "disabled"})
    assert disabled.ok and "heuristically" in disabled.detail
    missing = check_compat({**base, "derpyuPatched": False, "patch": "no-profile-setting"})
    assert not missing.ok and "ROFMD_DSH_PROFILE_DIR" in missing.hint
    odd = check_compat({**base, "derpyuPatched": False, "patch": "unknown-structure"})
    assert not odd.ok and "SAFE_EXACT" in odd.hint
