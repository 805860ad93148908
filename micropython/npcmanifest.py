"""What an agent takes as a model manifest before it looks at a byte the manifest names: field types and sizes,
and a model that only goes forward (docs/protocol.md, "Manifests").

Runs under MicroPython and CPython 3.8+: deployed unchanged to both Python agents, like npcrecords.py.
"""

MAX_TEXT = 256  # characters of a string field (name, format, sha256, sig; a signature is ~96)
MAX_NUMBER = (1 << 53) - 1  # largest version and size (exact in every JSON reader)
TEXT_FIELDS = ("name", "format", "sha256", "sig", "algo", "base", "target", "patch_sha256")
WHOLE_FIELDS = ("version", "size", "base_version", "target_version", "patch_size")


def fields(value, what="manifest"):
    """A copy of manifest `value` whose known fields have their types and sizes; ValueError (answered
    `bad_field`, or a `parse` refusal for a fetched one) naming the field otherwise."""
    if not isinstance(value, dict):
        raise ValueError("%s must be a JSON object" % what)
    for k in TEXT_FIELDS:
        v = value.get(k)
        if v is not None and (not isinstance(v, str) or len(v) > MAX_TEXT):
            raise ValueError("%s.%s must be a string of at most %d characters" % (what, k, MAX_TEXT))
    for k in WHOLE_FIELDS:
        v = value.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_NUMBER):
            raise ValueError("%s.%s must be a whole number 0..%d" % (what, k, MAX_NUMBER))
    return dict(value)


def forward(manifest, running, line, allow_downgrade=False):
    """None when `manifest` may replace the `running` model's manifest (or None); else why not, for a refusal of
    kind `version`: a model named other than the agent's `line` (the deployed model's name), or older than the
    running model of its name, installs only when the request says `allow_downgrade`."""
    if allow_downgrade:
        return None
    name = manifest.get("name")
    if line is not None and name != line:
        return "model %r is not this device's line %r (allow_downgrade installs it)" % (name, line)
    if running is not None and running.get("name") == name:
        new, cur = manifest.get("version"), running.get("version")
        if isinstance(new, int) and isinstance(cur, int) and new < cur:
            return "version %d is older than the running version %d (allow_downgrade installs it)" % (new, cur)
    return None
