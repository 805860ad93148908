// What the web agent takes as a model manifest before it looks at a byte the manifest names: field types and
// sizes, and a model that only goes forward. The JavaScript twin of micropython/npcmanifest.py.

export const MAX_TEXT = 256;
export const MAX_NUMBER = Number.MAX_SAFE_INTEGER;
const TEXT_FIELDS = ["name", "format", "sha256", "sig", "algo", "base", "target", "patch_sha256"];
const WHOLE_FIELDS = ["version", "size", "base_version", "target_version", "patch_size"];

/** A copy of manifest `value` whose known fields have their types and sizes; a TypeError (answered
 *  `bad_field`, or a `parse` refusal for a fetched one) naming the field otherwise. */
export function fields(value, what = "manifest") {
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw new TypeError(`${what} must be a JSON object`);
  for (const k of TEXT_FIELDS) {
    const v = value[k];
    if (v !== undefined && v !== null && (typeof v !== "string" || v.length > MAX_TEXT)) {
      throw new TypeError(`${what}.${k} must be a string of at most ${MAX_TEXT} characters`);
    }
  }
  for (const k of WHOLE_FIELDS) {
    const v = value[k];
    if (v !== undefined && v !== null && !(Number.isSafeInteger(v) && v >= 0)) {
      throw new TypeError(`${what}.${k} must be a whole number 0..${MAX_NUMBER}`);
    }
  }
  return { ...value };
}

/** null when `manifest` may replace the `running` model's manifest (or null); else why not (a refusal of kind
 *  `version`): another name than the device's `line`, or older than the running model, needs `allow_downgrade`. */
export function forward(manifest, running, line, allowDowngrade = false) {
  if (allowDowngrade) return null;
  const name = manifest.name;
  if (line !== null && line !== undefined && name !== line) {
    return `model '${name}' is not this device's line '${line}' (allow_downgrade installs it)`;
  }
  if (running && running.name === name && Number.isInteger(manifest.version) && Number.isInteger(running.version)) {
    if (manifest.version < running.version) {
      return `version ${manifest.version} is older than the running version ${running.version} (allow_downgrade installs it)`;
    }
  }
  return null;
}
