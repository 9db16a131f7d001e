#!/usr/bin/env python3
"""Fail on SQL whose operators a hostile schema could capture.

PostgreSQL looks an operator up by name and argument types in every schema
of search_path, and an operator of *exactly* the argument types wins over
one that needs an implicit cast, even when it sits in a schema after
pg_catalog (the CVE-2018-1058 class). `throttle > 0` (real, integer) has
no exact operator in pg_catalog, so anyone who can create in a schema of
the search_path it is resolved with can make it call her function. Two
places are exposed:

- SQL bound at install, with the search_path of CREATE EXTENSION (the
  extension's schema) or of the upgrade: views, policies, column defaults,
  CHECK constraints, and statements run by the script itself;
- SQL run with the caller's search_path: function and procedure bodies
  without `SET search_path` (a procedure that COMMITs cannot have one),
  and the queries the Rust code runs from the src/**/sql/*.sql files (each
  room of src/ keeps its SQL next to its Rust).

In those, this check requires:
  1. every operator spelled OPERATOR(pg_catalog.op);
  2. no operator hidden in a keyword: IN (...), NOT IN, BETWEEN, LIKE,
     ILIKE, SIMILAR TO, IS [NOT] DISTINCT FROM, = ANY / ALL, NULLIF, and
     CASE x WHEN (they look `=` and friends up in search_path too);
  3. every numeric constant next to an operator cast to its exact type
     (`0::pg_catalog.float4`), so that no operator is chosen through an
     implicit cast of a constant (a string constant takes the type of
     the other operand).
The bodies of functions with `SET search_path = pg_catalog, pg_temp` are
not checked: with pg_catalog first and nothing else searched, no other
schema's operator can be chosen. A query file that its Rust caller runs
with that search_path says so on a line
`-- check_sql_operators: search_path pinned by <where>`.

    python3 scripts/check_sql_operators.py            check src/**/*.sql and the upgrade scripts
    python3 scripts/check_sql_operators.py FILE...    check these files

Run by the lint layer of scripts/test.sh.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Upgrade scripts written since this check exists (released ones are
# never edited).
UPGRADE_SCRIPTS = ["sql/snowflake_id--0.7.0--0.8.0.sql"]
PINNED_FILE = "-- check_sql_operators: search_path pinned by"
PINNED_SET = re.compile(r"search_path\s*(=|TO)\s*'?pg_catalog\s*,\s*pg_temp'?", re.IGNORECASE)

TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>--[^\n]*)
  | (?P<dollar>\$(?P<tag>[A-Za-z_][A-Za-z0-9_]*)?\$)
  | (?P<param>\$[0-9]+)
  | (?P<extschema>@extschema@)
  | (?P<string>[EeBbXxNnUu]?'(?:[^']|'')*')
  | (?P<qident>"(?:[^"]|"")*")
  | (?P<number>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<cast>::)
  | (?P<assign>:=)
  | (?P<psqlvar>:'?[A-Za-z_][A-Za-z0-9_]*'?)
  | (?P<op>[+\-*/<>=~!@#%^&|`?]+)
  | (?P<punct>[(),;\[\].:])
""", re.VERBOSE)

KEYWORD_OPERATORS = {"IN", "BETWEEN", "LIKE", "ILIKE", "SIMILAR", "DISTINCT", "NULLIF", "ANY", "ALL", "SOME"}
RAISE_OPTIONS = {"ERRCODE", "MESSAGE", "DETAIL", "HINT", "COLUMN", "CONSTRAINT", "DATATYPE", "TABLE", "SCHEMA"}
# Words after which * is the star of a target list, not a multiplication.
STAR_AFTER = {"SELECT", "RETURNING", "DISTINCT", "ALL", ",", "(", "."}


class Tok:
    __slots__ = ("kind", "text", "line", "body")

    def __init__(self, kind, text, line, body=None):
        self.kind, self.text, self.line, self.body = kind, text, line, body

    @property
    def up(self):
        return self.text.upper() if self.kind == "ident" else self.text


def tokenize(sql, line=1):
    """Tokens of SQL; a dollar-quoted string is one token whose body is
    the text between the quotes (with the line it starts on)."""
    out, i = [], 0
    while i < len(sql):
        if sql.startswith("/*", i):  # nested block comments
            depth, j = 1, i + 2
            while depth and j < len(sql):
                if sql.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif sql.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            line += sql.count("\n", i, j)
            i = j
            continue
        if sql[i] == "\\" and (i == 0 or sql[i - 1] == "\n"):  # a psql meta-command line
            j = sql.find("\n", i)
            i = len(sql) if j < 0 else j
            continue
        m = TOKEN.match(sql, i)
        if not m:
            out.append(Tok("other", sql[i], line))
            i += 1
            continue
        kind = m.lastgroup if m.lastgroup != "tag" else "dollar"
        if kind == "extschema":
            kind = "ident"
        text = m.group(0)
        if kind == "dollar":
            close = sql.find(text, m.end())
            if close < 0:
                close = len(sql)
            body = sql[m.end():close]
            out.append(Tok("body", text, line, (body, line + text.count("\n"))))
            line += sql.count("\n", i, close + len(text))
            i = close + len(text)
            continue
        if kind not in ("ws", "comment"):
            out.append(Tok(kind, text, line))
        line += text.count("\n")
        i = m.end()
    return out


def statements(tokens):
    stmt = []
    for t in tokens:
        if t.kind == "punct" and t.text == ";":
            if stmt:
                yield stmt
            stmt = []
        else:
            stmt.append(t)
    if stmt:
        yield stmt


def operand_end_is_cast(tokens, k):
    """Whether the literal at tokens[k] is followed by ::type."""
    return k + 1 < len(tokens) and tokens[k + 1].kind == "cast"


def check_expr(tokens, where, problems):
    """Operators in an expression (a token list) that a schema could capture."""
    n = len(tokens)
    k = 0
    last_clause = None  # the last of UPDATE, SET, WHERE, FROM, RETURNING, SELECT
    while k < n:
        t = tokens[k]
        up = t.up
        if t.kind == "ident" and up in ("UPDATE", "SET", "WHERE", "FROM", "RETURNING", "SELECT"):
            last_clause = "SET_OF_UPDATE" if up == "SET" and last_clause == "UPDATE" else up
        # OPERATOR(pg_catalog.op): qualified; its literal operands must be cast.
        if t.kind == "ident" and up == "OPERATOR" and k + 1 < n and tokens[k + 1].text == "(":
            j = k + 2
            inner = []
            while j < n and tokens[j].text != ")":
                inner.append(tokens[j].text)
                j += 1
            if not (len(inner) >= 3 and inner[0] == "pg_catalog" and inner[1] == "."):
                problems.append(f"{where}:{t.line}: OPERATOR({''.join(inner)}) is not pg_catalog's")
            check_literal_operands(tokens, k, j, where, problems)
            k = j + 1
            continue
        if t.kind == "body":  # a nested body (a DO block or a string in a body): check it too
            body, line = t.body
            check_expr(tokenize(body, line), where, problems)
        elif t.kind == "op":
            prev = tokens[k - 1] if k else None
            nxt = tokens[k + 1] if k + 1 < n else None
            if t.text == "*" and (prev is None or prev.up in STAR_AFTER or (nxt and nxt.text in (")", ","))
                                  or (nxt and nxt.up == "FROM")):
                pass  # SELECT *, count(*), t.*
            elif t.text == "=>":
                pass  # a named argument
            elif (t.text == "=" and last_clause == "SET_OF_UPDATE" and prev is not None and prev.kind == "ident"
                  and k >= 2 and (tokens[k - 2].up == "SET" or tokens[k - 2].text == ",")):
                pass  # UPDATE ... SET col = ..., col = ...: an assignment
            elif t.text == "=" and prev is not None and prev.up in RAISE_OPTIONS and k >= 2 and tokens[k - 2].up in ("USING", ","):
                pass  # RAISE ... USING ERRCODE = ...
            elif t.text == "-" and nxt is not None and nxt.kind == "number" and (
                    prev is None or prev.kind in ("op", "punct") and prev.text not in (")", "]")
                    or prev.kind == "ident" and prev.up in ("SELECT", "RETURN", "THEN", "ELSE", "DEFAULT", "AND", "OR", "NOT", "WHEN")):
                pass  # a negative constant: folded by the parser, no operator
            elif t.text == "%" and nxt is not None and nxt.up in ("TYPE", "ROWTYPE"):
                pass  # PL/pgSQL's %TYPE
            elif t.text == "#" and nxt is not None and nxt.up in ("VARIABLE_CONFLICT", "PRINT_STRICT_PARAMS"):
                pass  # a PL/pgSQL compiler option
            else:
                problems.append(f"{where}:{t.line}: operator {t.text} is not qualified: write OPERATOR(pg_catalog.{t.text})")
        elif t.kind == "ident" and up in KEYWORD_OPERATORS:
            prev = tokens[k - 1] if k else None
            if up == "DISTINCT" and not (prev and prev.up in ("IS", "NOT")):
                pass  # SELECT DISTINCT, string_agg(DISTINCT ...)
            elif up in ("ALL", "ANY", "SOME") and not (prev and prev.kind == "op"):
                pass  # UNION ALL, SELECT ALL
            elif up == "IN" and prev and (prev.up in ("FOR", "LOOP") or is_for_variable(tokens, k)):
                pass  # PL/pgSQL FOR x IN ...
            else:
                problems.append(f"{where}:{t.line}: {up} looks an operator up in search_path: "
                                f"write it with OPERATOR(pg_catalog.…)")
        elif t.kind == "ident" and up == "CASE" and k + 1 < n and tokens[k + 1].up != "WHEN":
            problems.append(f"{where}:{t.line}: CASE x WHEN compares with = from search_path: "
                            f"write CASE WHEN x OPERATOR(pg_catalog.=) …")
        k += 1


def is_for_variable(tokens, k):
    """Whether IN at tokens[k] follows `FOR var[, var]` or `FOREACH var`
    (PL/pgSQL loops)."""
    j = k - 1
    while j >= 0 and k - j <= 6:
        t = tokens[j]
        if t.up in ("FOR", "FOREACH"):
            return True
        if not (t.kind == "ident" or t.text in (",", ".")):
            return False
        j -= 1
    return False


def check_literal_operands(tokens, op_start, op_end, where, problems):
    """The operands on each side of OPERATOR(...) at tokens[op_start:op_end+1]
    must not be bare literals."""
    left = tokens[op_start - 1] if op_start else None
    right = tokens[op_end + 1] if op_end + 1 < len(tokens) else None
    # A string constant takes the other operand's type; a number has its
    # own (integer, numeric), which an implicit cast must then bridge.
    if left is not None and left.kind == "number":
        problems.append(f"{where}:{left.line}: the constant {left.text} next to an operator has no exact type: "
                        f"cast it (::pg_catalog.<type>)")
    if right is not None and right.kind == "number" and not operand_end_is_cast(tokens, op_end + 1):
        problems.append(f"{where}:{right.line}: the constant {right.text} next to an operator has no exact type: "
                        f"cast it (::pg_catalog.<type>)")


def split_depth(tokens, start, stop_words):
    """Tokens from start up to (not including) a stop word or a , or ) at
    depth 0; returns (tokens, index of the stop)."""
    depth, j, out = 0, start, []
    while j < len(tokens):
        t = tokens[j]
        if t.text in ("(", "["):
            depth += 1
        elif t.text in (")", "]"):
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and (t.text == "," or t.up in stop_words):
            break
        out.append(t)
        j += 1
    return out, j


def parenthesized(tokens, k):
    """The tokens inside the parentheses that open at tokens[k]."""
    depth, j = 0, k
    while j < len(tokens):
        if tokens[j].text == "(":
            depth += 1
        elif tokens[j].text == ")":
            depth -= 1
            if depth == 0:
                return tokens[k + 1:j], j
        j += 1
    return tokens[k + 1:], j


COLUMN_STOPS = {"NOT", "NULL", "PRIMARY", "UNIQUE", "REFERENCES", "CHECK", "DEFAULT", "CONSTRAINT",
                "GENERATED", "COLLATE"}


def check_defaults_and_checks(stmt, where, problems):
    """DEFAULT expressions, CHECK (...) and GENERATED ... AS (...) of a
    CREATE/ALTER TABLE or of a routine's parameters."""
    k = 0
    while k < len(stmt):
        t = stmt[k]
        if t.up == "DEFAULT":
            expr, k = split_depth(stmt, k + 1, COLUMN_STOPS)
            check_expr(expr, where, problems)
            continue
        if t.up in ("CHECK", "AS") and k + 1 < len(stmt) and stmt[k + 1].text == "(":
            expr, k = parenthesized(stmt, k + 1)
            check_expr(expr, where, problems)
        k += 1


def check_statement(stmt, where, problems):
    words = [t.up for t in stmt[:6] if t.kind == "ident"]
    head = " ".join(words)
    if head.startswith(("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", "CREATE PROCEDURE",
                        "CREATE OR REPLACE PROCEDURE")):
        bodies = [t for t in stmt if t.kind == "body"]
        header = [t for t in stmt if t.kind != "body"]
        # The parameters' defaults are bound at install.
        opening = next((i for i, t in enumerate(header) if t.text == "("), None)
        if opening is not None:
            params, _ = parenthesized(header, opening)
            check_defaults_and_checks(params, where, problems)
        pinned = False
        for i, t in enumerate(header):
            if t.up == "SET" and i + 1 < len(header) and header[i + 1].up == "SEARCH_PATH":
                rest = " ".join(x.text for x in header[i + 1:i + 6])
                pinned = bool(PINNED_SET.search(rest))
        if not pinned:
            for b in bodies:
                body, line = b.body
                check_expr(tokenize(body, line), where, problems)
        return
    if head.startswith(("CREATE VIEW", "CREATE OR REPLACE VIEW", "CREATE MATERIALIZED VIEW")):
        # After the AS that follows the name and its options.
        k = next((i for i, t in enumerate(stmt) if t.up == "AS" and i > 2), len(stmt))
        check_expr(stmt[k + 1:], where, problems)
        return
    if head.startswith(("CREATE POLICY", "ALTER POLICY")):
        for k, t in enumerate(stmt):
            if t.up in ("USING", "CHECK") and k + 1 < len(stmt) and stmt[k + 1].text == "(":
                expr, _ = parenthesized(stmt, k + 1)
                check_expr(expr, where, problems)
        return
    if head.startswith(("CREATE TABLE", "ALTER TABLE", "CREATE DOMAIN", "ALTER DOMAIN")):
        check_defaults_and_checks(stmt, where, problems)
        return
    if head.startswith(("SELECT", "WITH", "INSERT", "UPDATE", "DELETE", "DO", "VALUES")):
        check_expr(stmt, where, problems)
        return
    # GRANT, REVOKE, COMMENT, CREATE TRIGGER ... EXECUTE FUNCTION f(),
    # ALTER EXTENSION ...: no expressions.


def check_file(path):
    text = path.read_text()
    where = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    if any(line.startswith(PINNED_FILE) for line in text.splitlines()):
        return []
    problems = []
    for stmt in statements(tokenize(text)):
        check_statement(stmt, where, problems)
    return problems


def main(argv):
    if any(a.startswith("-") for a in argv[1:]):
        print(__doc__, file=sys.stderr)
        return 2
    sources = sorted((ROOT / "src").rglob("*.sql"))
    if not argv[1:] and not sources:
        print("no SQL found under src/: has it moved?", file=sys.stderr)
        return 1
    paths = [pathlib.Path(a).resolve() for a in argv[1:]] or (
        sources + [ROOT / p for p in UPGRADE_SCRIPTS])
    problems = [p for path in paths for p in check_file(path)]
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"{len(problems)} operator(s) a schema in search_path could capture; see scripts/check_sql_operators.py",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
