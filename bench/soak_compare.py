#!/usr/bin/python3
"""Output checks of the crash-safety soak (bench/soak.sh); standard library + h5dump/h5diff only.

  soak_compare.py partial REF DIR   after a kill: no file under a final name is partial
  soak_compare.py equal   REF DIR   after the rerun: DIR holds what the uninterrupted run REF holds

REF and DIR are output folders of the same command. Prints one line per problem and exits 1 when there is one.

"partial" (a run was killed -9 at a random moment; DIR is what it left):
  - NAME.tmp.PID files are ignored: a killed writer leaves its temporary, the next run removes it;
  - a .safetensors file must be whole: its header parses and its tensors fill the file exactly;
  - a .json file must parse; a .jsonl (a journal, appended a line at a time) may end in one partial line;
  - a record (.h5) is resumable, so it exists under its final name during the run: h5dump must read it, and
    the first samples_done rows of every dataset must equal the uninterrupted run's;
  - any other file (figures, CSV, HTML, tokenizer copies) must be byte-equal to the reference.
"equal" (the rerun finished):
  - the same files, and no temporary left behind;
  - byte-equal, except where a file holds timings: report's metrics.json ("seconds") and report.html ("Made by
    mimic report in X s"), the training log.jsonl ("elapsed", "tokens_per_second") are compared without them;
  - a record is compared with h5diff (values of every dataset and attribute), not byte by byte: HDF5 places the
    chunks of a resumed file elsewhere.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

TIMING_KEYS = {"seconds", "elapsed", "tokens_per_second"}
HTML_TIMING = re.compile(rb"(Made by <code>mimic report</code> in )[0-9.]+( s)")


def files_under(root):
    out = set()
    for d, _, names in os.walk(root):
        for n in names:
            out.add(os.path.relpath(os.path.join(d, n), root))
    return out


def is_temporary(rel):
    return re.search(r"\.tmp\.[0-9]+$", rel) is not None


def read(path):
    with open(path, "rb") as f:
        return f.read()


def safetensors_problem(path):
    data = read(path)
    if len(data) < 8:
        return "shorter than a safetensors header"
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        return "header length %d beyond the file (%d bytes)" % (n, len(data))
    try:
        header = json.loads(data[8:8 + n])
    except ValueError as e:
        return "header is not JSON (%s)" % e
    body = len(data) - 8 - n
    end = 0
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, stop = t["data_offsets"]
        if not 0 <= begin <= stop <= body:
            return "tensor %s at [%d, %d) outside the %d data bytes" % (name, begin, stop, body)
        end = max(end, stop)
    if end != body:
        return "tensors end at byte %d of %d data bytes" % (end, body)
    return None


def without_timings(j):
    if isinstance(j, dict):
        return {k: without_timings(v) for k, v in j.items() if k not in TIMING_KEYS}
    if isinstance(j, list):
        return [without_timings(v) for v in j]
    return j


def same_file(a, b, rel):
    """Byte-equal, or for report.html equal but for the time it states."""
    return a == b or (rel.endswith(".html") and HTML_TIMING.sub(rb"\1X\2", a) == HTML_TIMING.sub(rb"\1X\2", b))


def same_but_timings(a, b, lines):
    """Two JSON documents (lines: JSON lines) equal once their timing keys are dropped."""
    def parse(text):
        return [without_timings(json.loads(x)) for x in text.splitlines()] if lines else without_timings(json.loads(text))
    try:
        return parse(a) == parse(b)
    except ValueError:
        return False


def h5(*args):
    return subprocess.run(["h5dump", *args], capture_output=True)


def record_datasets(path):
    """(name, dims) of every dataset of an HDF5 file, from h5dump's header."""
    r = h5("-H", path)
    if r.returncode != 0:
        return None
    sets, stack, name = [], [], None
    for line in r.stdout.decode().splitlines():
        m = re.match(r'\s*(GROUP|DATASET) "([^"]*)" \{', line)
        if m:
            stack.append(m.group(2) if m.group(1) == "GROUP" else None)
            if m.group(1) == "DATASET":
                name = "/".join(s for s in stack[:-1] if s not in (None, "/")) + "/" + m.group(2)
            continue
        m = re.match(r"\s*DATASPACE\s+SIMPLE \{ \( ([0-9, ]+) \)", line)
        if m and name is not None:
            sets.append(("/" + name.lstrip("/"), [int(x) for x in m.group(1).split(",")]))
            name = None
        if re.match(r"\s*\}\s*$", line) and stack:
            stack.pop()
    return sets


def samples_done(path):
    r = h5("-a", "/samples_done", path)
    m = re.search(rb"\(0\): (-?[0-9]+)", r.stdout)
    return int(m.group(1)) if r.returncode == 0 and m else None


def rows(path, dataset, dims, n):
    """The first n rows of a dataset, as raw bytes."""
    with tempfile.NamedTemporaryFile() as f:
        start = ",".join("0" for _ in dims)
        count = ",".join([str(n)] + [str(d) for d in dims[1:]])
        r = h5("-d", dataset, "-s", start, "-c", count, "-b", "LE", "-o", f.name, path)
        return read(f.name) if r.returncode == 0 else None


def record_partial_problem(ref, path):
    sets = record_datasets(path)
    if sets is None:
        return "h5dump cannot read it"
    done = samples_done(path)
    if done is None:
        return "no samples_done attribute"
    ref_sets = dict(record_datasets(ref))
    for name, dims in sets:
        if name not in ref_sets:
            return "dataset %s is not in the reference" % name
        n = min(done, dims[0], ref_sets[name][0])
        if not name.endswith("/weights") and dims[0] < done:
            return "samples_done is %d but %s has %d rows" % (done, name, dims[0])
        if n > 0 and rows(path, name, dims, n) != rows(ref, name, ref_sets[name], n):
            return "the first %d rows of %s differ from the uninterrupted run's" % (n, name)
    return None


def partial(ref, out):
    problems = []
    for rel in sorted(files_under(out)):
        if is_temporary(rel):
            continue
        path, ref_path = os.path.join(out, rel), os.path.join(ref, rel)
        why = None
        if rel.endswith(".safetensors"):
            why = safetensors_problem(path)
        elif rel.endswith(".jsonl"):
            lines = read(path).split(b"\n")
            for i, line in enumerate(lines[:-1]):  # the part after the last newline may be cut short
                try:
                    json.loads(line)
                except ValueError:
                    why = "line %d is not JSON" % (i + 1)
                    break
        elif rel.endswith(".json"):
            try:
                json.loads(read(path))
            except ValueError as e:
                why = "not JSON (%s)" % e
        elif rel.endswith(".h5"):
            why = record_partial_problem(ref_path, path)
        elif not os.path.exists(ref_path):
            why = "not in the uninterrupted run's output"
        elif not same_file(read(ref_path), read(path), rel):
            why = "differs from the uninterrupted run's (%d bytes, reference %d)" % (os.path.getsize(path), os.path.getsize(ref_path))
        if why:
            problems.append("partial file %s: %s" % (rel, why))
    return problems


def equal(ref, out):
    problems, found = [], set()
    got, want = files_under(out), files_under(ref)
    for rel in sorted(got - want):
        problems.append(("temporary left behind: %s" if is_temporary(rel) else "extra file: %s") % rel)
    for rel in sorted(want - got):
        problems.append("missing file: %s" % rel)
    for rel in sorted(want & got):
        a, b = read(os.path.join(ref, rel)), read(os.path.join(out, rel))
        if a == b:
            continue
        if rel.endswith(".h5"):
            r = subprocess.run(["h5diff", os.path.join(ref, rel), os.path.join(out, rel)], capture_output=True)
            if r.returncode == 0:
                found.add("%s equal by h5diff" % rel)
                continue
            problems.append("%s differs (h5diff: %s)" % (rel, r.stdout.decode().strip().splitlines()[:3]))
        elif rel.endswith(".json") or rel.endswith(".jsonl"):
            if same_but_timings(a, b, rel.endswith(".jsonl")):
                found.add("%s equal but for timings" % rel)
            else:
                problems.append("%s differs" % rel)
        elif same_file(a, b, rel):
            found.add("%s equal but for its time" % rel)
        else:
            problems.append("%s differs (%d bytes, reference %d)" % (rel, len(b), len(a)))
    # one note per kind of file: layer_00/log.jsonl ... layer_05/log.jsonl are layer_*/log.jsonl
    notes = {re.sub(r"layer_[0-9]+", "layer_*", n) for n in found}
    return problems, notes


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("partial", "equal"):
        sys.exit(__doc__)
    mode, ref, out = sys.argv[1:]
    if mode == "partial":
        problems = partial(ref, out)
    else:
        problems, notes = equal(ref, out)
        for n in sorted(notes):
            print("note: " + n)
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
