#!/usr/bin/env python3
"""Render bench/run.sh's samples as the Markdown report.

bench/run.sh only collects: every sample goes into a samples file, one line
per measurement, `key<TAB>value value ...` in the order measured, plus
`meta|name<TAB>value` lines describing the run (versions, machine, sizes,
which workloads ran). This script turns that file into the tables of
bench/README.md, so the numbers can be re-rendered, or the tables changed,
without measuring again:

    python3 bench/report.py .run/bench/report.samples.txt > report.md

Medians of the repetitions are reported; a ratio between two generators
measured back to back is the median of the per-repetition ratios.
"""
import sys


def load(path):
    samples, meta = {}, {}
    with open(path) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("\t")
            if key.startswith("meta|"):
                meta[key[5:]] = value
            else:
                samples[key] = value.split()
    return samples, meta


def median(values):
    """Median of numeric strings; the middle sample as measured, or the
    mean of the two middle ones to 3 decimals."""
    vals = sorted(values, key=float)
    n = len(vals)
    if n == 0:
        return "0"
    if n % 2:
        return vals[n // 2]
    return f"{(float(vals[n // 2 - 1]) + float(vals[n // 2])) / 2:.3f}"


def fmt(x, d=0):
    return f"{float(x):.{d}f}"


def ratio(a, b):
    return f"{float(a) / float(b):.2f}" if float(b) > 0 else "n/a"


def mib(b):
    return f"{float(b) / 1048576:.1f} MiB"


class Report:
    def __init__(self, samples, meta):
        self.r, self.m = samples, meta
        self.out = []

    def med(self, key):
        return median(self.r.get(key, []))

    def pratio(self, a, b):
        """Median over repetitions of a's sample / b's sample."""
        if not self.r.get(a) or not self.r.get(b):
            return "n/a"
        per_rep = [f"{float(x) / float(y):.6f}" for x, y in zip(self.r[a], self.r[b])
                   if float(y) > 0]
        return fmt(median(per_rep), 2)

    def want(self, w):
        return w in self.m["workloads"].split()

    def p(self, line=""):
        self.out.append(line)

    def render(self):
        m = self.m
        gens = m["gens"].split(";")
        floor, nocall = m["floor"], m["nocall"]
        smoke = m["smoke"] == "1"
        ceiling = m["ceiling_per_ms"]
        self.p("## Benchmark results")
        self.p()
        self.p(f"PostgreSQL {m['pg_version']}, snowflake_id {m['project_version']}, "
               f"{m['nproc']} cores ({m['cpu_model']}), {m['mem']} RAM.")
        self.p(f"Medians of {m['reps']} interleaved repetitions ({m['reps1']} for workload 1 at "
               f"N = {m['n1']}, {m['reps2']} for workload 2)"
               + (" — SMOKE MODE, toy sizes: these numbers mean nothing" if smoke else "") + ".")
        self.p(f"Command: `{m['settings']}bash bench/run.sh{' --smoke' if smoke else ''}`.")
        if self.want("1"):
            for n in (m["n1"], m["n10"]):
                self.generation(n, gens + [floor, nocall, "bulk"], ceiling)
        if self.want("1b"):
            self.lead(m["n10"], ceiling)
        if self.want("2"):
            self.pgbench(gens + [floor, nocall], m["clients"].split(), m["pgb_t"])
        if self.want("3"):
            self.inserts(gens, m["nins"])
        if self.want("4"):
            self.range_scan(m["nrange"], int(m["reps"]) * int(m["hours"]))
        if self.want("5b"):
            self.lead_many(m["nscale"], m["lead_backends"].split(), ceiling, m["max_lead_ms"])
        if self.want("5"):
            self.scaling(m["nscale"], m["scale_backends"].split(), gens[0], floor, gens[1],
                         ceiling)
        return "\n".join(self.out) + "\n"

    def generation(self, n, names, ceiling):
        self.p()
        self.p(f"### 1. Generation, `SELECT count(f()) FROM generate_series(1, {n})`")
        self.p()
        self.p("| generator | ms | IDs/ms | vs nextval (× faster) | vs floor (× slower) "
               f"| vs no-call expression (× slower) | share of format ceiling ({ceiling}/ms) |")
        self.p("|---|---:|---:|---:|---:|---:|---:|")
        nv = self.med(f"gen{n}|nextval (bigserial)")
        fl = self.med(f"gen{n}|floor (constant function)")
        nc = self.med(f"gen{n}|constant expression (no call)")
        for name in names:
            ms = self.med(f"gen{n}|{name}")
            rate = f"{int(n) / float(ms):.0f}" if float(ms) else "inf"
            label = f"`snowflake_nextval({n})` (bulk, `count(*)`)" if name == "bulk" else name
            share = ""
            if name.startswith("snowflake") or name == "bulk":
                share = f"{100 * float(rate) / float(ceiling):.0f}%"
            self.p(f"| {label} | {fmt(ms, 1)} | {rate} | {ratio(nv, ms)} | {ratio(ms, fl)} "
                   f"| {ratio(ms, nc)} | {share} |")

    def lead(self, n, ceiling):
        self.p()
        self.p(f"### 1b. {n} IDs against the lead bound (`max_lead = 100ms`), "
               f"`SELECT count(snowflake_nextval()) FROM (SELECT generate_series(1, {n})) s`")
        self.p()
        ms, lead = self.med("lead|ms"), self.med("lead|lead")
        cpu, waits = self.med("lead|cpu"), self.med("lead|waits")
        eff = f"{100 * (int(n) / float(ceiling) - float(lead)) / float(ms):.0f}%"
        self.p("| wall ms | lead at end (ms) | clock-backed rate / ceiling | backend CPU ms "
               "| back-pressure waits |")
        self.p("|---:|---:|---:|---:|---:|")
        self.p(f"| {fmt(ms)} | {fmt(lead)} | {eff} | {cpu} | {waits} |")
        self.p()
        self.p("Clock-backed rate = (N / ceiling − lead at end) / wall time: the IDs not "
               "borrowed from the future, per ms. CPU well below wall time means the backend "
               "sleeps at the bound instead of spinning.")

    def pgbench(self, names, clients, seconds):
        self.p()
        self.p(f"### 2. pgbench `-M prepared`, `SELECT f();` (TPS, {seconds}s runs)")
        self.p()
        self.p(f"Median TPS of {self.m['reps2']} repetitions; each ratio is the median of the "
               "per-repetition ratios (`snowflake_nextval()` and the floor run back to back).")
        self.p()
        self.p("| generator |" + "".join(f" {c} client{'' if c == '1' else 's'} |"
                                         for c in clients))
        self.p("|---|" + "---:|" * len(clients))
        for name in names:
            if not self.r.get(f"pgb{clients[0]}|{name}"):
                continue
            row = f"| {name} |"
            for c in clients:
                t = self.med(f"pgb{c}|{name}")
                vs_nv = self.pratio(f"pgb{c}|{name}", f"pgb{c}|nextval (bigserial)")
                vs_fl = self.pratio(f"pgb{c}|{name}", f"pgb{c}|floor (constant function)")
                row += f" {fmt(t)} ({vs_fl}× floor{'' if vs_nv == 'n/a' else f', {vs_nv}× nextval'}) |"
            self.p(row)

    def inserts(self, names, nins):
        self.p()
        self.p(f"### 3. Inserts, {nins} rows into `(id PRIMARY KEY DEFAULT f(), v int)`")
        self.p()
        self.p("| generator | one statement ms | vs bigserial | pgbench 8 clients ms "
               "| PK index after load | vs bigserial | vs gen_random_uuid "
               "| after 20% delete + insert |")
        self.p("|---|---:|---:|---:|---:|---:|---:|---:|")
        bs1 = self.med("ins1|nextval (bigserial)")
        bss = self.r["size_load|nextval (bigserial)"][0]
        us = self.r["size_load|gen_random_uuid()"][0]
        for name in names:
            ms, s = self.med(f"ins1|{name}"), self.r[f"size_load|{name}"][0]
            self.p(f"| {name} | {fmt(ms)} | {ratio(ms, bs1)}× | {self.med(f'ins8|{name}')} "
                   f"| {mib(s)} | {ratio(s, bss)}× | {ratio(s, us)}× "
                   f"| {mib(self.r[f'size_churn|{name}'][0])} |")

    def range_scan(self, nrange, samples):
        self.p()
        self.p(f"### 4. Range scan: one hour out of {nrange} rows over 10 days")
        self.p()
        self.p(f"| access path | ms (median of {samples} hours) | table + indexes |")
        self.p("|---|---:|---:|")
        self.p(f"| `id` between `snowflake_min_id` bounds (primary key only) "
               f"| {fmt(self.med('range|sf'), 2)} | {mib(self.r['range_size|sf'][0])} |")
        self.p(f"| `created_at` column with its own index | {fmt(self.med('range|ca'), 2)} "
               f"| {mib(self.r['range_size|ca'][0])} |")

    def lead_many(self, n, backends, ceiling, max_lead_ms):
        self.p()
        self.p(f"### 5b. Many backends at the default lead bound (`max_lead = {max_lead_ms}ms`): "
               f"each takes {n} IDs")
        self.p()
        self.p("The format's bound is N × IDs ÷ ceiling ms of clock, less the lead the "
               "generator may borrow (`max_lead`); the second ratio uses the lead left "
               "at the end instead. *from*: `SELECT count(snowflake_nextval()) FROM "
               f"generate_series(1, {n})`, as in workload 5 (the rows are materialised "
               "before the first call); *stream*: `... FROM (SELECT generate_series(1, "
               f"{n})) s`, as in 1b. Medians.")
        self.p()
        self.p("| backends | statement | wall ms | bound ms | wall ÷ bound "
               "| lead at end (ms) | wall ÷ (IDs ÷ ceiling − lead at end) "
               "| back-pressure waits |")
        self.p("|---:|---|---:|---:|---:|---:|---:|---:|")
        for b in backends:
            ideal = int(b) * int(n) / float(ceiling)
            bound = ideal - float(max_lead_ms)
            for form in ("from", "stream"):
                ms, lead = self.r.get(f"leadN{b}|{form}|ms"), self.r.get(f"leadN{b}|{form}|lead")
                if not ms:
                    continue
                # A run that ends behind the clock borrowed nothing.
                per_rep = [f"{float(w) / (ideal - max(float(le), 0)):.6f}"
                           for w, le in zip(ms, lead)]
                # In a smoke run the IDs fit in the lead: no bound to compare.
                vs_bound = ratio(median(ms), bound) if bound > 0 else "n/a"
                vs_end = fmt(median(per_rep), 2) if per_rep else "n/a"
                self.p(f"| {b} | {form} | {fmt(median(ms))} | {fmt(bound)} "
                       f"| {vs_bound} | {fmt(median(lead))} | {vs_end} "
                       f"| {fmt(self.med(f'leadN{b}|{form}|waits'))} |")

    def scaling(self, n, backends, snowflake, floor, nextval, ceiling):
        self.p()
        self.p(f"### 5. Many backends at once: each runs `SELECT count(f()) FROM "
               f"generate_series(1, {n})` (`max_lead = 1h`)")
        self.p()
        self.p("Aggregate IDs per ms of wall time, medians; the ratios are medians of the "
               "per-repetition ratios.")
        self.p()
        self.p(f"| backends | floor | `snowflake_nextval()` | share of ceiling ({ceiling}/ms) "
               f"| × floor | `nextval` (bigserial) |")
        self.p("|---:|---:|---:|---:|---:|---:|")
        for b in backends:
            sf = self.med(f"scale{b}|{snowflake}")
            self.p(f"| {b} | {fmt(self.med(f'scale{b}|{floor}'))} | {fmt(sf)} "
                   f"| {100 * float(sf) / float(ceiling):.0f}% "
                   f"| {self.pratio(f'scale{b}|{snowflake}', f'scale{b}|{floor}')} "
                   f"| {fmt(self.med(f'scale{b}|{nextval}'))} |")


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    samples, meta = load(argv[1])
    sys.stdout.write(Report(samples, meta).render())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
