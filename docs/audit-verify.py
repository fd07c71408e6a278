#!/usr/bin/env python3
"""Verify a Gantry audit export without Gantry (docs/audit-format.md).

    python3 audit-verify.py EXPORT_FILE SHA256:FINGERPRINT

Checks the manifest's Ed25519 signature and key fingerprint, every event's hash over
its exact bytes, the chain from the anchor (unfiltered exports), the count and the
end of the chain, and the file's sha256. Prints one line (OK ... or FAIL line N: ...)
and exits 0 or 1, whatever the file holds. Needs Python 3 and the `cryptography` package.
"""
import base64
import binascii
import csv
import hashlib
import json
import re
import sys
from datetime import datetime, timedelta, timezone

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

HEADER = ["seq", "occurred_at", "actor", "action", "target_type", "target_id", "prev_hash", "hash", "body"]
# The manifest's fields this script reads, with their JSON types.
MANIFEST = {"version": int, "organization_id": str, "format": str, "from": str, "to": str, "mode": str, "anchor": str,
            "first_seq": int, "last_seq": int, "last_hash": str, "events": int, "sha256": str, "key_id": str,
            "key_fingerprint": str, "public_key": str}
# RFC 3339 as Go writes it: seconds always, up to nine fractional digits, Z or an offset.
RFC3339 = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})")
HEX = re.compile(r"(?:[0-9a-fA-F]{2})*")
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
csv.field_size_limit(2**31 - 1)  # an event's body may be longer than the module's 128 KiB


class Failed(Exception):
    """A verdict: the first bad line (0: not one line's fault) and why."""

    def __init__(self, line, message):
        super().__init__(f"line {line}: {message}" if line else message)


def when(text):
    """An RFC 3339 time as whole nanoseconds since 1970, exact whatever its zone.

    Python's datetime keeps microseconds; a bound may carry nanoseconds, so the
    fraction is counted apart.
    """
    m = RFC3339.fullmatch(text) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"{text!r} is not an RFC 3339 time")
    seconds, fraction, zone = m.groups()
    at = datetime.fromisoformat(seconds + ("+00:00" if zone == "Z" else zone))
    return (at - EPOCH) // timedelta(seconds=1) * 10**9 + int((fraction or "0").ljust(9, "0"))


def b64(text):
    return base64.b64decode(text, validate=True)


def csv_row(raw):
    """One line of the file as a CSV row, or None."""
    try:
        return next(csv.reader([raw.decode("utf-8").rstrip("\r\n")], strict=True), None)
    except (UnicodeDecodeError, csv.Error):
        return None


def json_value(raw):
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # also bad UTF-8, or nesting deeper than Python recurses
        return None


def read_trailer(number, last):
    """The manifest (checked for the fields read), its signed bytes, its signature, and whether the file is CSV."""
    if last.startswith(b"#gantry-manifest,"):
        row = csv_row(last)
        if row is None or len(row) != 3:
            raise Failed(number, "the last line is not the signed manifest")
        signed, signature, is_csv = row[1], row[2], True
    else:
        trailer = json_value(last)
        if (not isinstance(trailer, dict) or not isinstance(trailer.get("signed"), str) or not trailer["signed"]
                or not isinstance(trailer.get("signature", ""), str)):
            raise Failed(number, "the last line is not the signed manifest (file truncated?)")
        signed, signature, is_csv = trailer["signed"], trailer.get("signature", ""), False
    try:
        signature = b64(signature)
    except (binascii.Error, ValueError):
        raise Failed(number, "signature: not base64")
    manifest = json_value(signed)
    if not isinstance(manifest, dict):
        raise Failed(number, "the manifest is not JSON")
    for field, kind in MANIFEST.items():
        if type(manifest.get(field)) is not kind:  # noqa: E721 (a bool is no number here)
            raise Failed(number, f"the manifest's {field} is missing or not a {'number' if kind is int else 'string'}")
    if manifest["version"] != 1:
        raise Failed(number, f"manifest version {manifest['version']}; this verifier reads version 1")
    return manifest, signed.encode("utf-8"), signature, is_csv


def check_signature(number, manifest, signed, signature, is_csv, pinned):
    try:
        public = b64(manifest["public_key"])
        key = Ed25519PublicKey.from_public_bytes(public)
    except (binascii.Error, ValueError):
        raise Failed(number, "signature: the manifest carries no valid Ed25519 public key")
    try:
        key.verify(signature, signed)
    except InvalidSignature:
        raise Failed(number, "signature: does not verify over the manifest (manifest or signature altered)")
    fingerprint = "SHA256:" + base64.b64encode(hashlib.sha256(public).digest()).decode().rstrip("=")
    if fingerprint != manifest["key_fingerprint"]:
        raise Failed(number, "signature: the manifest's fingerprint is not its key's")
    if fingerprint != pinned:
        raise Failed(number, f"signature: key {manifest['key_id']} ({fingerprint}) is not the pinned key")
    if (manifest["format"] == "csv") != is_csv:
        raise Failed(number, f"the manifest says {manifest['format']} but the file is not")
    return fingerprint


def read_event(number, raw, is_csv):
    """A line's seq, prev_hash and hash (bytes) and the exact hashed bytes of its event."""
    if is_csv:
        row = csv_row(raw)
        if row is None or len(row) != len(HEADER):
            raise Failed(number, "not an event row")
        if not re.fullmatch(r"[+-]?\d+", row[0]):
            raise Failed(number, "the sequence number is not a number")
        seq, prev, digest, body = int(row[0]), row[6], row[7], row[8].encode("utf-8")
    else:
        # The hashed bytes stand in the line as they were hashed: between the first
        # ',"body":' and the line's last '}'.
        event, text = json_value(raw), raw.rstrip(b"\r\n")
        start = text.find(b',"body":')
        if (not isinstance(event, dict) or set(event) != {"seq", "prev_hash", "hash", "body"} or type(event["seq"]) is not int
                or not isinstance(event["prev_hash"], str) or not isinstance(event["hash"], str) or start < 0 or not text.endswith(b"}")):
            raise Failed(number, "not an event line")
        seq, prev, digest, body = event["seq"], event["prev_hash"], event["hash"], text[start + len(b',"body":'):-1]
    if not HEX.fullmatch(prev):
        raise Failed(number, "prev_hash is not hex")
    if not HEX.fullmatch(digest) or len(digest) != 64:
        raise Failed(number, "hash is not a sha256 in hex")
    return seq, bytes.fromhex(prev), bytes.fromhex(digest), body


def verify(data, pinned):
    lines = [line + b"\n" for line in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]
    if not lines[-1]:
        lines.pop()
    if not lines:
        raise Failed(0, "the file is empty")
    body_lines = lines[:-1]
    manifest, signed, signature, is_csv = read_trailer(len(lines), lines[-1].rstrip(b"\r\n"))
    fingerprint = check_signature(len(lines), manifest, signed, signature, is_csv, pinned)
    try:
        start, end = when(manifest["from"]), when(manifest["to"])
    except ValueError as e:
        raise Failed(len(lines), f"the manifest's range: {e}")

    chain = manifest["mode"] == "chain"
    count, prev_seq, prev_hash = 0, None, None
    for number, raw in enumerate(body_lines, start=1):
        if is_csv and number == 1:
            if csv_row(raw) != HEADER:
                raise Failed(number, "not the export's CSV header")
            continue
        seq, line_prev, line_hash, body = read_event(number, raw, is_csv)
        if hashlib.sha256(line_prev + body).digest() != line_hash:
            raise Failed(number, f"seq {seq}: the event's hash does not match its bytes (the event was edited)")
        fields = json_value(body)
        if not isinstance(fields, dict):
            raise Failed(number, f"seq {seq}: the event is not JSON")
        if fields.get("seq") != seq or fields.get("organization_id") != manifest["organization_id"]:
            raise Failed(number, f"seq {seq}: the line's sequence or organization is not its event's")
        try:
            inside = start <= when(fields.get("occurred_at")) < end
        except ValueError:
            inside = False
        if not inside:
            raise Failed(number, f"seq {seq}: occurred at {fields.get('occurred_at')}, outside the export's range")
        if count == 0:
            if chain and line_prev.hex() != manifest["anchor"]:
                raise Failed(number, f"seq {seq} does not follow the anchor")
            if seq != manifest["first_seq"]:
                raise Failed(number, f"seq {seq} where the manifest starts at seq {manifest['first_seq']}")
        elif chain and (seq != prev_seq + 1 or line_prev != prev_hash):
            raise Failed(number, f"seq {seq} does not follow seq {prev_seq}")
        elif seq <= prev_seq:
            raise Failed(number, f"seq {seq} after seq {prev_seq}")
        prev_seq, prev_hash, count = seq, line_hash, count + 1
    if count != manifest["events"] or (count and (prev_seq != manifest["last_seq"] or prev_hash.hex() != manifest["last_hash"])):
        raise Failed(len(body_lines) + 1, f"the file ends after {count} events; the manifest says {manifest['events']}")
    if hashlib.sha256(b"".join(body_lines)).hexdigest() != manifest["sha256"]:
        raise Failed(0, "the file's sha256 differs from the signed manifest's")
    events = "1 event" if count == 1 else f"{count} events"
    return f"OK {events}, mode {manifest['mode']}, signed by {manifest['key_id']} ({fingerprint})"


def main(path, pinned):
    try:
        with open(path, "rb") as f:
            data = f.read()
        print(verify(data, pinned))
    except Failed as verdict:
        print(f"FAIL {verdict}")
        sys.exit(1)
    except OSError as e:
        print(f"FAIL reading {path}: {e.strerror}")
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 (whatever a file holds, the answer is one line)
        print(f"FAIL the file could not be read as an export: {type(e).__name__}: {e}")
        sys.exit(1)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip())
        sys.exit(2)
    main(sys.argv[1], sys.argv[2])
