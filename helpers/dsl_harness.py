"""A domain-specific language and its verifier as an agent's action space: three measured case studies.

The paper (a position paper) argues that a DSL plus its verifier *compresses* the path from intent to action,
*prunes* invalid actions before they run and gives a *checkable* learning signal. This module builds the pieces
the chapter measures; the case studies themselves are ours.

* **Case 1, data queries.** A real SQLite database made by :func:`make_database`; a small typed query DSL
  (``from orders join customers select sum orders.total where orders.year >= 2021 by customers.city order desc
  limit 5``) with a left-to-right verifier (:func:`verify`: syntax, schema, scope, joins, types, operators,
  values, aggregation, read-only) that also yields the verifier-valid next tokens (:func:`allowed_next`, used for
  constrained decoding and for counting well-formed programs, :func:`count_programs`); a compiler to SQL
  (:func:`compile_sql`); a noisy policy with a per-decision error rate (:func:`corrupt`) for three interfaces.
* **Case 2, planning.** Blocksworld with raw ``move(x, y)`` actions vs a verifier that masks actions whose
  preconditions fail (:func:`bw_check`, :func:`bw_bfs`, :func:`bw_episode`).
* **Case 3, learning.** Rewards for a policy that writes DSL programs: sparse success vs verifier feedback
  (:func:`valid_prefix_length`).
* **Case 4, a learned agent.** A small transformer from request to DSL or SQL (:func:`make_agent`,
  :func:`train_agent`), greedy or constrained decoding (:func:`decode`), verifier- or SQLite-guided repair
  (:func:`agent_answer`), bits per intent (:func:`bits_per_intent`).
* **Case 5, structured credit.** RL for a request-conditioned policy with several samples per request, a
  leave-one-out baseline and a KL anchor to its warm start, with a sparse reward or blame-conserving per-token
  credit at the verifier's error position (:func:`group_advantages`, :func:`group_reinforce`), scored by the
  area under its held-out greedy success curve (:func:`greedy_outcomes`, :func:`curve_auc`). The earlier,
  unanchored REINFORCE (:func:`token_advantages`, :func:`reinforce_agent`) is kept for reference.
* **Case 1 at measured rates.** A learned agent's per-token error rates by token class
  (:func:`token_error_profile`) drive the noisy policy (:func:`corrupt` with a profile), with token-level SQL
  repair (:func:`agent_episode` with ``sql_repair``).
"""

from __future__ import annotations

import math
import sqlite3
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

import numpy as np
import torch

from helpers import validate as V
from helpers.nn import Transformer, TransformerConfig

__all__ = [
    "SCHEMA", "FOREIGN_KEYS", "DSL_VOCAB", "END", "ERROR_KINDS", "Column", "VerifierError", "Verdict", "Program",
    "make_database", "verify", "allowed_next", "parse", "compile_sql", "execute", "results_equal",
    "count_programs", "make_intents", "Intent", "render_request", "corrupt", "free_decisions", "inject_error",
    "sql_vocab", "valid_prefix_length", "binomial_z", "Episode", "agent_episode", "reinforce_program",
    "steps_to_level", "ARMS",
    "bw_blocks", "bw_states", "bw_raw_actions", "bw_check", "bw_apply", "bw_bfs", "bw_distances", "bw_episode",
    "bw_graph", "COVERAGE_GROUPS", "AGENT_INTERFACES", "request_tokens", "agent_vocab", "encode", "make_agent",
    "train_agent", "decode", "sqlite_error_position", "AgentResult", "agent_answer", "bits_per_intent",
    "checkpoint_config", "CREDIT_ARMS", "token_advantages", "reinforce_agent", "sample_programs",
    "greedy_success", "token_class", "token_error_profile", "GROUP_ARMS", "group_advantages", "greedy_outcomes",
    "group_reinforce", "curve_auc", "PARA_TEMPLATES", "paraphrase_request", "paraphrase_intents",
    "sql_allowed_next", "sql_grammatical", "PARA_ARMS", "paired_bootstrap", "read_n_train",
    "para_steps", "paraphrase_split",
]

# ----------------------------------------------------------------------------------------------------------------
# Schema and database
# ----------------------------------------------------------------------------------------------------------------
CITIES = ("Berlin", "Lagos", "Lima", "Osaka", "Paris", "Quito")
SEGMENTS = ("business", "retail", "student")
CATEGORIES = ("books", "games", "garden", "music", "tools")


@dataclass(frozen=True)
class Column:
    """A column the DSL may name: ``table.name`` of type ``int``, ``real`` or ``text`` (text: a closed domain)."""

    table: str
    name: str
    type: str
    domain: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.table}.{self.name}"

    @property
    def numeric(self) -> bool:
        return self.type in ("int", "real")


SCHEMA: dict[str, Column] = {c.ref: c for c in [
    Column("customers", "city", "text", CITIES),
    Column("customers", "segment", "text", SEGMENTS),
    Column("customers", "age", "int"),
    Column("products", "category", "text", CATEGORIES),
    Column("products", "price", "real"),
    Column("products", "rating", "int"),
    Column("orders", "quantity", "int"),
    Column("orders", "total", "real"),
    Column("orders", "year", "int"),
]}
TABLES = ("customers", "orders", "products")
# join keys (both directions); the DSL's join needs no ON clause, the schema supplies it
FOREIGN_KEYS: dict[tuple[str, str], tuple[str, str]] = {
    ("orders", "customers"): ("orders.customer_id", "customers.id"),
    ("orders", "products"): ("orders.product_id", "products.id"),
}
FOREIGN_KEYS.update({(b, a): (kb, ka) for (a, b), (ka, kb) in list(FOREIGN_KEYS.items())})


def make_database(seed: int = 0, n_customers: int = 300, n_products: int = 40, n_orders: int = 3000
                  ) -> sqlite3.Connection:
    """An in-memory SQLite shop (customers, products, orders) made from ``seed``; the connection is read-only.

    ``PRAGMA query_only`` is the sandbox: a destructive statement that reaches it is *counted* by the harness
    (it would have run on a real database) but cannot change the data.
    """
    seed = V.seed("seed", seed)
    for name, v in (("n_customers", n_customers), ("n_products", n_products), ("n_orders", n_orders)):
        V.integer(name, v, min=1)
    rng = np.random.default_rng(seed)
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, city TEXT, segment TEXT, age INTEGER)")
    con.execute("CREATE TABLE products (id INTEGER PRIMARY KEY, category TEXT, price REAL, rating INTEGER)")
    con.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, product_id INTEGER, "
                "quantity INTEGER, total REAL, year INTEGER)")
    city_p = rng.dirichlet(np.full(len(CITIES), 3.0))
    cust = [(i, CITIES[rng.choice(len(CITIES), p=city_p)], SEGMENTS[rng.integers(len(SEGMENTS))],
             int(rng.integers(18, 75))) for i in range(1, n_customers + 1)]
    prices = np.round(rng.lognormal(3.0, 0.7, n_products), 2)
    prod = [(i, CATEGORIES[rng.integers(len(CATEGORIES))], float(prices[i - 1]), int(rng.integers(1, 6)))
            for i in range(1, n_products + 1)]
    orders = []
    for i in range(1, n_orders + 1):
        c, p, q = int(rng.integers(1, n_customers + 1)), int(rng.integers(1, n_products + 1)), int(rng.integers(1, 6))
        orders.append((i, c, p, q, round(q * prod[p - 1][2], 2), int(rng.integers(2019, 2025))))
    con.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", cust)
    con.executemany("INSERT INTO products VALUES (?, ?, ?, ?)", prod)
    con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)", orders)
    con.commit()
    con.execute("PRAGMA query_only = ON")
    return con


# ----------------------------------------------------------------------------------------------------------------
# The DSL: tokens, a left-to-right verifier, constrained decoding
# ----------------------------------------------------------------------------------------------------------------
KEYWORDS = ("from", "join", "select", "where", "by", "order", "limit")
FUNCS = ("val", "count", "sum", "avg", "min", "max")
OPS = ("=", "!=", "<", "<=", ">", ">=")
ORDER_OPS = ("<", "<=", ">", ">=")
DIRS = ("asc", "desc")
INT_LITERALS = ("1", "2", "3", "5", "10", "20", "30", "40", "50", "100", "2020", "2021", "2022", "2023")
TEXT_LITERALS = tuple(f"'{v}'" for v in CITIES + SEGMENTS + CATEGORIES)
WRITE_WORDS = ("drop", "delete", "update", "insert")
BAD_OPS = ("=>", "==", "=<", "like", "<>")
END = "<end>"
DSL_VOCAB: tuple[str, ...] = (KEYWORDS + TABLES + FUNCS + tuple(SCHEMA) + OPS + DIRS + INT_LITERALS
                              + TEXT_LITERALS)

ERROR_KINDS = ("syntax", "missing_clause", "write_forbidden", "unknown_table", "unknown_function",
               "unknown_column", "column_not_in_scope", "bad_join", "type_mismatch", "bad_operator",
               "unknown_value", "aggregation_error")


@dataclass(frozen=True)
class VerifierError:
    """One finding of the verifier: its ``kind`` (one of :data:`ERROR_KINDS`), the token ``position`` and a message."""

    kind: str
    position: int
    message: str

    def __str__(self) -> str:
        return f"{self.kind} at token {self.position}: {self.message}"


@dataclass
class Verdict:
    ok: bool
    errors: list[VerifierError] = field(default_factory=list)


def _lex(tok: str) -> str:
    if tok in KEYWORDS:
        return "kw"
    if tok in WRITE_WORDS:
        return "write"
    if tok in TABLES:
        return "table"
    if tok in FUNCS:
        return "func"
    if tok in OPS:
        return "op"
    if tok in BAD_OPS:
        return "badop"
    if tok in DIRS:
        return "dir"
    if tok == END:
        return "end"
    if len(tok) >= 2 and tok[0] == tok[-1] == "'":
        return "text"
    if tok.isdigit():
        return "int"
    if "." in tok:
        return "col"
    return "word"


# A parser state is a hashable tuple: (phase, table, join, func, where_col, n_where, stage, halt), where
# stage 0 = where allowed, 1 = after by, 2 = after order, 3 = after limit; halt = a fatal error stopped parsing.
_START = ("start", None, None, None, None, 0, 0, False)
_Err = tuple[str, str] | None


def _col_checks(state: tuple, tok: str) -> _Err:
    col = SCHEMA.get(tok)
    if col is None:
        return "unknown_column", f"{tok!r} is not a column of the schema (columns: {', '.join(SCHEMA)})"
    if col.table not in (state[1], state[2]):
        scope = " and ".join(t for t in (state[1], state[2]) if t)
        return "column_not_in_scope", f"{tok} belongs to {col.table}, which is not joined (in scope: {scope})"
    return None


def _step(state: tuple, tok: str) -> tuple[tuple, _Err]:
    """One token of the left-to-right verifier: the next state and the error this token makes (or None)."""
    phase, table, join, func, wcol, n_where, stage, halt = state
    if halt:
        return state, None
    kind = _lex(tok)

    def fatal(k: str, msg: str):
        return (phase, table, join, func, wcol, n_where, stage, True), (k, msg)

    def go(ph: str, **kw):
        s = dict(phase=ph, table=table, join=join, func=func, wcol=wcol, n_where=n_where, stage=stage)
        s.update(kw)
        return (s["phase"], s["table"], s["join"], s["func"], s["wcol"], s["n_where"], s["stage"], False)

    if kind == "write":
        return fatal("write_forbidden", f"{tok!r}: the query language is read-only")
    if phase == "start":
        if tok == "from":
            return go("table"), None
        if kind == "kw" or kind == "end":
            return fatal("missing_clause", "a program starts with 'from <table>'")
        return fatal("syntax", f"expected 'from', got {tok!r}")
    if phase == "table":
        if kind == "table":
            return go("after_table", table=tok), None
        if kind == "word":
            return fatal("unknown_table", f"{tok!r} is not a table (tables: {', '.join(TABLES)})")
        return fatal("syntax", f"expected a table name, got {tok!r}")
    if phase == "after_table":
        if tok == "join" and join is None:
            return go("join_table"), None
        if tok == "select":
            return go("func"), None
        if kind == "end" or kind == "kw":
            return fatal("missing_clause", f"expected 'select' after the tables, got {tok!r}")
        return fatal("syntax", f"expected 'join' or 'select', got {tok!r}")
    if phase == "join_table":
        if kind == "table":
            nxt = go("after_table", join=tok)
            if (table, tok) not in FOREIGN_KEYS:
                return nxt, ("bad_join", f"no foreign key links {table} and {tok}")
            return nxt, None
        if kind == "word":
            return fatal("unknown_table", f"{tok!r} is not a table (tables: {', '.join(TABLES)})")
        return fatal("syntax", f"expected a table to join, got {tok!r}")
    if phase == "func":
        if kind == "func":
            return go("sel_col", func=tok), None
        if kind == "word":
            return fatal("unknown_function", f"{tok!r} is not a function (functions: {', '.join(FUNCS)})")
        return fatal("syntax", f"expected a function ({', '.join(FUNCS)}), got {tok!r}")
    if phase == "sel_col":
        if kind != "col":
            return fatal("syntax", f"expected a column after {func!r}, got {tok!r}")
        err = _col_checks(state, tok)
        if err is None and func in ("sum", "avg") and not SCHEMA[tok].numeric:
            err = ("type_mismatch", f"{func} needs a numeric column, {tok} is text")
        return go("clauses"), err
    if phase == "clauses":
        if kind == "end":
            return go("done"), None
        if tok == "where" and stage == 0 and n_where < 2:
            return go("where_col"), None
        if tok == "by" and stage == 0:
            nxt = go("by_col", stage=1)
            if func == "val":
                return nxt, ("aggregation_error", "'by' groups rows: the select needs an aggregate, not 'val'")
            return nxt, None
        if tok == "order" and stage <= 1:
            return go("order_dir", stage=2), None
        if tok == "limit" and stage <= 2:
            return go("limit_n", stage=3), None
        return fatal("syntax", f"unexpected {tok!r}: clauses come as where (at most 2), by, order, limit")
    if phase == "where_col":
        if kind != "col":
            return fatal("syntax", f"expected a column after 'where', got {tok!r}")
        return go("where_op", wcol=tok), _col_checks(state, tok)
    if phase == "where_op":
        col = SCHEMA.get(wcol)
        if kind == "badop":
            return go("where_val", wcol=wcol), ("bad_operator", f"{tok!r} is not an operator ({' '.join(OPS)})")
        if kind != "op":
            return fatal("syntax", f"expected an operator, got {tok!r}")
        if col is not None and not col.numeric and tok in ORDER_OPS:
            return go("where_val"), ("bad_operator", f"{tok!r} compares numbers; {wcol} is text (use = or !=)")
        return go("where_val"), None
    if phase == "where_val":
        col = SCHEMA.get(wcol)
        nxt = go("clauses", n_where=n_where + 1, wcol=None)
        if kind == "text":
            if col is None:
                return nxt, None
            if col.numeric:
                return nxt, ("type_mismatch", f"{wcol} is {col.type}, got the text value {tok}")
            if tok[1:-1] not in col.domain:
                return nxt, ("unknown_value", f"{tok} is not a value of {wcol} ({', '.join(col.domain)})")
            return nxt, None
        if kind == "int":
            if col is not None and not col.numeric:
                return nxt, ("type_mismatch", f"{wcol} is text, got the number {tok}")
            return nxt, None
        return fatal("syntax", f"expected a value, got {tok!r}")
    if phase == "by_col":
        if kind != "col":
            return fatal("syntax", f"expected a column after 'by', got {tok!r}")
        return go("clauses"), _col_checks(state, tok)
    if phase == "order_dir":
        if kind == "dir":
            return go("clauses"), None
        return fatal("syntax", f"expected asc or desc, got {tok!r}")
    if phase == "limit_n":
        if kind == "int" and int(tok) > 0:
            return go("clauses"), None
        if kind == "text":
            return go("clauses"), ("type_mismatch", f"limit needs a positive number, got {tok}")
        return fatal("syntax", f"expected a positive number after 'limit', got {tok!r}")
    if phase == "done":
        return fatal("syntax", f"unexpected {tok!r} after the end of the program")
    raise AssertionError(f"unknown phase {phase}")  # pragma: no cover


def _check_tokens(tokens: Sequence[str], name: str = "tokens") -> list[str]:
    if isinstance(tokens, str):
        raise TypeError(f"{name} must be a sequence of token strings, not one string (use str.split())")
    return V.sequence(name, tokens, of=lambda k, t: V.instance(k, t, str))


# Checks that can be switched off (coverage ablation): each group names the non-fatal error kinds it reports.
COVERAGE_GROUPS: dict[str, tuple[str, ...]] = {
    "type": ("type_mismatch", "bad_operator"),
    "domain": ("unknown_value",),
    "scope": ("column_not_in_scope", "bad_join"),
}


def _check_disabled(disabled: object) -> frozenset[str]:
    if isinstance(disabled, str) or not isinstance(disabled, (tuple, list, set, frozenset)):
        raise TypeError(f"disabled must be a collection of error kinds, got {V.describe(disabled)}")
    optional = {k for g in COVERAGE_GROUPS.values() for k in g}
    bad = [k for k in disabled if k not in optional]
    if bad:
        raise ValueError(f"disabled may only name the non-fatal kinds {sorted(optional)}, got {bad}")
    return frozenset(disabled)


def verify(tokens: Sequence[str], disabled: Sequence[str] = ()) -> Verdict:
    """Check a DSL program (a token sequence, without :data:`END`) against grammar, schema and types.

    Returns a :class:`Verdict`; every error names its kind, token position and what was expected. Fatal errors
    (syntax, unknown table/function, writes) stop the parse; the others are collected and parsing goes on.
    ``disabled``: error kinds the verifier does not report (a verifier with less coverage, see
    :data:`COVERAGE_GROUPS`).
    """
    tokens = _check_tokens(tokens)
    off = _check_disabled(disabled)
    state, errors = _START, []
    for i, tok in enumerate([*tokens, END]):
        state, err = _step(state, tok)
        if err is not None and err[0] not in off:
            errors.append(VerifierError(err[0], i, err[1]))
        if state[7]:
            break
    return Verdict(ok=not errors, errors=errors)


def _state_of(tokens: Sequence[str]) -> tuple:
    state = _START
    for i, tok in enumerate(tokens):
        state, err = _step(state, tok)
        if err is not None:
            raise ValueError(f"the prefix is not verifier-valid: {err[0]} at token {i}: {err[1]}")
    return state


@cache
def _allowed(state: tuple, off: frozenset = frozenset()) -> tuple[str, ...]:
    out = []
    for t in (*DSL_VOCAB, END):
        nxt, err = _step(state, t)
        if not nxt[7] and (err is None or err[0] in off):
            out.append(t)
    return tuple(out)


def allowed_next(prefix: Sequence[str]) -> tuple[str, ...]:
    """Constrained decoding: the tokens (and :data:`END`) that keep ``prefix`` verifier-valid.

    Every verifier-valid prefix can be completed into a verified program, so a decoder that only picks from this
    set emits only programs that pass :func:`verify`. Raises ValueError if ``prefix`` itself is invalid.
    """
    prefix = _check_tokens(prefix, "prefix")
    try:
        return _allowed(_state_of(prefix))
    except ValueError as e:
        raise ValueError(f"prefix: {e}") from None


def free_decisions(tokens: Sequence[str]) -> int:
    """How many tokens of a valid program (its END included) had an alternative under constrained decoding."""
    tokens = _check_tokens(tokens)
    state, n = _START, 0
    for tok in [*tokens, END]:
        n += len(_allowed(state)) > 1
        state, err = _step(state, tok)
        if err is not None:
            raise ValueError(f"tokens must be a valid program: {err[1]}")
    return n


def count_programs(max_len: int) -> list[int]:
    """``out[n]`` = number of verifier-valid programs of exactly ``n`` tokens (END not counted), ``n <= max_len``.

    A dynamic programme over the verifier's states (each state's completions are counted once).
    """
    max_len = V.integer("max_len", max_len, min=0)

    @cache
    def f(state: tuple, r: int) -> int:  # completions of exactly r tokens, then END
        total = 0
        for t in _allowed(state):
            if t == END:
                total += r == 0
            elif r > 0:
                total += f(_step(state, t)[0], r - 1)
        return total

    return [f(_START, n) for n in range(max_len + 1)]


# ----------------------------------------------------------------------------------------------------------------
# From a verified program to SQL, and execution
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Program:
    table: str
    join: str | None
    func: str
    col: str
    where: tuple[tuple[str, str, str], ...]
    by: str | None
    order: str | None
    limit: str | None


def parse(tokens: Sequence[str], disabled: Sequence[str] = ()) -> Program:
    """The abstract syntax of a verified program (raises ValueError naming the first error otherwise);
    ``disabled`` as in :func:`verify`."""
    t = _check_tokens(tokens)
    v = verify(t, disabled)
    if not v.ok:
        raise ValueError(f"tokens must be a verified program, got an error: {v.errors[0]}")
    i = 2
    join = None
    if t[i] == "join":
        join, i = t[i + 1], i + 2
    func, col, i = t[i + 1], t[i + 2], i + 3
    where, by, order, limit = [], None, None, None
    while i < len(t):
        if t[i] == "where":
            where.append((t[i + 1], t[i + 2], t[i + 3]))
            i += 4
        else:
            val = t[i + 1]
            if t[i] == "by":
                by = val
            elif t[i] == "order":
                order = val
            else:
                limit = val
            i += 2
    return Program(t[1], join, func, col, tuple(where), by, order, limit)


def compile_sql(tokens: Sequence[str], disabled: Sequence[str] = ()) -> list[str]:
    """Compile a verified DSL program into SQL tokens (join on the schema's foreign key; a join without one, which
    only a verifier with ``disabled`` scope checks lets through, becomes a cross join)."""
    p = parse(tokens, disabled)
    sel = [p.col] if p.func == "val" else [p.func.upper(), "(", p.col, ")"]
    out = ["SELECT"] + ([p.by, ","] if p.by else []) + sel + ["FROM", p.table]
    if p.join and (p.table, p.join) in FOREIGN_KEYS:
        a, b = FOREIGN_KEYS[(p.table, p.join)]
        out += ["JOIN", p.join, "ON", a, "=", b]
    elif p.join:
        out += ["JOIN", p.join]
    for k, (c, op, v) in enumerate(p.where):
        out += ["WHERE" if k == 0 else "AND", c, op, v]
    if p.by:
        out += ["GROUP", "BY", p.by]
    if p.order:
        out += ["ORDER", "BY", "2" if p.by else "1", p.order.upper()]
    if p.limit:
        out += ["LIMIT", p.limit]
    return out


WRITE_SQL = ("DROP", "DELETE", "UPDATE", "INSERT", "ALTER", "CREATE")


def execute(con: sqlite3.Connection, sql: str | Sequence[str]) -> tuple[str, object]:
    """Run SQL: ``("ok", rows)``, ``("error", message)`` or ``("harmful", message)`` for a write that reached it."""
    if not isinstance(con, sqlite3.Connection):
        raise TypeError(f"con must be a sqlite3.Connection, got {V.describe(con)}")
    text = sql if isinstance(sql, str) else " ".join(_check_tokens(sql, "sql"))
    harmful = text.split(maxsplit=1)[0].upper() in WRITE_SQL if text.strip() else False
    try:
        rows = con.execute(text).fetchall()
    except sqlite3.Error as e:
        return ("harmful" if harmful else "error"), str(e)
    return ("harmful", "write executed") if harmful else ("ok", rows)


def results_equal(a: object, b: object) -> bool:
    """Equal query results as multisets of rows (floats rounded to 6 digits)."""
    def norm(rows):
        return sorted(tuple(round(x, 6) if isinstance(x, float) else x for x in r) for r in rows)
    return isinstance(a, list) and isinstance(b, list) and norm(a) == norm(b)


# ----------------------------------------------------------------------------------------------------------------
# Intents with gold programs, and the noisy policy
# ----------------------------------------------------------------------------------------------------------------
WORDS = {"customers.city": "city", "customers.segment": "segment", "customers.age": "age",
         "products.category": "category", "products.price": "price", "products.rating": "rating",
         "orders.quantity": "quantity", "orders.total": "order value", "orders.year": "year",
         "val": "list", "count": "count of", "sum": "total", "avg": "average", "min": "smallest",
         "max": "largest", "asc": "lowest first", "desc": "highest first",
         "=": "is", "!=": "is not", "<": "below", "<=": "at most", ">": "above", ">=": "at least"}


def render_request(tokens: Sequence[str]) -> str:
    """A templated English request for a program (what a user would ask)."""
    p = parse(tokens)
    s = f"{WORDS[p.func]} {WORDS[p.col]}"
    if p.by:
        s += f" per {WORDS[p.by]}"
    s += f" from {p.table}" + (f" with {p.join}" if p.join else "")
    for c, op, v in p.where:
        s += f", where {WORDS[c]} {WORDS[op]} {v.strip(chr(39))}"
    if p.order:
        s += f", {WORDS[p.order]}"
    if p.limit:
        s += f", top {p.limit}"
    return s


@dataclass(frozen=True)
class Intent:
    request: str
    program: tuple[str, ...]
    sql: tuple[str, ...]
    result: list = field(compare=False, hash=False, repr=False)


_SENSIBLE = {"customers.age": ("20", "30", "40", "50"), "products.price": ("10", "20", "50", "100"),
             "products.rating": ("1", "2", "3"), "orders.quantity": ("1", "2", "3", "5"),
             "orders.total": ("20", "50", "100"), "orders.year": ("2020", "2021", "2022", "2023")}
_GROUPABLE = ("customers.city", "customers.segment", "products.category", "products.rating", "orders.year")


def make_intents(con: sqlite3.Connection, n: int, seed: int = 0, max_rows: int = 30) -> list[Intent]:
    """``n`` distinct intents: random verifier-valid programs (a shaped distribution over clauses) whose result is
    non-empty and has at most ``max_rows`` rows; each with its request text, gold SQL and gold result."""
    V.instance("con", con, sqlite3.Connection)
    n, seed = V.integer("n", n, min=1), V.seed("seed", seed)
    max_rows = V.integer("max_rows", max_rows, min=1)
    rng = np.random.default_rng([seed, 7])
    out, seen = [], set()
    for _ in range(200 * n):
        if len(out) == n:
            break
        toks = ["from", str(rng.choice(TABLES, p=[0.25, 0.5, 0.25]))]
        joinable = [b for (a, b) in FOREIGN_KEYS if a == toks[1]]
        if rng.random() < 0.5:
            toks += ["join", str(rng.choice(joinable))]
        f = str(rng.choice(FUNCS, p=[0.05, 0.2, 0.3, 0.25, 0.1, 0.1]))
        toks += ["select", f]
        cols = [t for t in allowed_next(toks) if t in SCHEMA and (f in ("val", "count") or SCHEMA[t].numeric)]
        toks.append(str(rng.choice(cols)))
        for _w in range(int(rng.choice(3, p=[0.3, 0.45, 0.25]))):
            c = str(rng.choice([t for t in allowed_next(toks + ["where"]) if t in SCHEMA]))
            if SCHEMA[c].numeric:
                op, v = str(rng.choice(OPS)), str(rng.choice(_SENSIBLE[c]))
            else:
                op, v = str(rng.choice(["=", "!="], p=[0.8, 0.2])), str(rng.choice(allowed_next(toks + ["where", c, "="])))
            toks += ["where", c, op, v]
        if f != "val" and rng.random() < 0.6:
            groups = [t for t in allowed_next(toks + ["by"]) if t in _GROUPABLE and t != toks[-1]]
            if groups:
                toks += ["by", str(rng.choice(groups))]
        if rng.random() < 0.4:
            toks += ["order", str(rng.choice(DIRS))]
        if rng.random() < 0.3 or f == "val":
            toks += ["limit", str(rng.choice(["1", "3", "5", "10"]))]
        toks_t = tuple(toks)
        if toks_t in seen or not verify(toks_t).ok:
            continue
        sql = compile_sql(toks_t)
        status, rows = execute(con, sql)
        if status != "ok" or not rows or len(rows) > max_rows or any(None in r for r in rows):
            continue
        seen.add(toks_t)
        out.append(Intent(render_request(toks_t), toks_t, tuple(sql), rows))
    if len(out) < n:
        raise ValueError(f"could only make {len(out)} distinct intents, asked for {n}")
    return out


# Plausible mistakes per token class: "near" confusions stay in the vocabulary (and may be silently wrong),
# hallucinations and slips are outside it.
_DSL_HALLUC = {
    "kw": ["filter", "group", "sort", "top"], "table": ["customer", "order", "product", "sales"],
    "func": ["average", "total", "mean"], "col": ["orders.amount", "customer.city", "products.name", "orders.date"],
    "op": ["=>", "==", "like"], "text": ["'Pariss'", "'book'", "'retial'"], "int": ["'2021'", "'5'"],
    "dir": ["descending", "up"],
}
_SQL_SLIPS = {"SELECT": "SELCT", "FROM": "FORM", "WHERE": "WHER", "GROUP": "GRUOP", "ORDER": "ODER", "BY": "BYY",
              "JOIN": "JION", "ON": "ONN", "AND": "ADN", "LIMIT": "LIMT", "ASC": "ASCE", "DESC": "DSEC",
              "COUNT": "CNT", "SUM": "SUMM", "AVG": "AVERAGE", "MIN": "MINIMUM", "MAX": "MAXIMUM",
              "(": "[", ")": "]", ",": ";"}
_SQL_KW = tuple(k for k in _SQL_SLIPS if k.isalpha())
_SQL_PUNCT = ("(", ")", ",")
_SQL_COLS = tuple(SCHEMA) + ("orders.id", "orders.customer_id", "orders.product_id", "customers.id", "products.id")
_DESTRUCTIVE_SQL = (["DROP", "TABLE", "orders"], ["DELETE", "FROM", "customers"],
                    ["UPDATE", "products", "SET", "price", "=", "0"])


def sql_vocab() -> tuple[str, ...]:
    """The token vocabulary of the free-SQL interface (keywords, punctuation, identifiers, operators, literals)."""
    return (_SQL_KW + _SQL_PUNCT + TABLES + _SQL_COLS + OPS + INT_LITERALS + TEXT_LITERALS)


def _sql_class(tok: str) -> str:
    if tok in _SQL_KW:
        return "kw"
    if tok in _SQL_PUNCT:
        return "punct"
    if tok in TABLES:
        return "table"
    if tok in _SQL_COLS:
        return "col"
    if tok in OPS:
        return "op"
    if tok[0] == "'":
        return "text"
    return "int"


# A grammar for the SQL the DSL compiles to (and any query of the same shape), as a left-to-right automaton:
#   SELECT item [, item] FROM table [JOIN table ON col = col] [WHERE cond (AND cond)*] [GROUP BY col]
#   [ORDER BY (int | col) [ASC | DESC]] [LIMIT int]         item: col | FUNC ( col )     cond: col op literal
# It knows the schema's names (tables, columns) but not which column belongs to which table, nor types: what a
# grammar-constrained decoder (Synchromesh-style, without semantic checks) enforces.
_SQL_FUNCS = ("COUNT", "SUM", "AVG", "MIN", "MAX")
_SQL_START = ("start", 0, False)


@cache
def _sql_allowed(state: tuple) -> tuple[str, ...]:
    phase, n_sel, joined = state
    lits = INT_LITERALS + TEXT_LITERALS
    table = {
        "start": ("SELECT",), "sel": _SQL_COLS + _SQL_FUNCS, "fn_open": ("(",), "fn_col": _SQL_COLS,
        "fn_close": (")",), "item": ((",",) if n_sel == 1 else ()) + ("FROM",), "from": TABLES,
        "tables": (() if joined else ("JOIN",)) + ("WHERE", "GROUP", "ORDER", "LIMIT", END),
        "join_t": TABLES, "on": ("ON",), "on_c1": _SQL_COLS, "on_eq": ("=",), "on_c2": _SQL_COLS,
        "w_col": _SQL_COLS, "w_op": OPS, "w_val": lits, "w_done": ("AND", "GROUP", "ORDER", "LIMIT", END),
        "group": ("BY",), "g_col": _SQL_COLS, "g_done": ("ORDER", "LIMIT", END), "order": ("BY",),
        "o_key": INT_LITERALS + _SQL_COLS, "o_dir": ("ASC", "DESC", "LIMIT", END), "o_done": ("LIMIT", END),
        "limit": INT_LITERALS, "done": (END,),
    }
    return table[phase]


_SQL_NEXT = {  # phase -> {token or class: next phase}
    "start": {"SELECT": "sel"}, "fn_open": {"(": "fn_col"}, "fn_col": {"col": "fn_close"},
    "fn_close": {")": "item"}, "item": {",": "sel", "FROM": "from"}, "from": {"table": "tables"},
    "tables": {"JOIN": "join_t", "WHERE": "w_col", "GROUP": "group", "ORDER": "order", "LIMIT": "limit"},
    "join_t": {"table": "on"}, "on": {"ON": "on_c1"}, "on_c1": {"col": "on_eq"}, "on_eq": {"=": "on_c2"},
    "on_c2": {"col": "tables"}, "w_col": {"col": "w_op"}, "w_op": {"op": "w_val"}, "w_val": {"lit": "w_done"},
    "w_done": {"AND": "w_col", "GROUP": "group", "ORDER": "order", "LIMIT": "limit"}, "group": {"BY": "g_col"},
    "g_col": {"col": "g_done"}, "g_done": {"ORDER": "order", "LIMIT": "limit"}, "order": {"BY": "o_key"},
    "o_key": {"lit": "o_dir", "col": "o_dir"}, "o_dir": {"ASC": "o_done", "DESC": "o_done", "LIMIT": "limit"},
    "o_done": {"LIMIT": "limit"}, "limit": {"lit": "done"},
}


def _sql_step(state: tuple | None, tok: str) -> tuple | None:
    """The grammar automaton's next state after ``tok`` (None: the grammar forbids it here or already failed)."""
    if state is None or tok not in _sql_allowed(state) or tok == END:
        return None
    phase, n_sel, joined = state
    if phase == "sel":
        return ("fn_open", n_sel + 1, joined) if tok in _SQL_FUNCS else ("item", n_sel + 1, joined)
    cls = "col" if tok in _SQL_COLS else "table" if tok in TABLES else "op" if tok in OPS and phase == "w_op" \
        else "lit" if tok in INT_LITERALS + TEXT_LITERALS else tok
    nxt = _SQL_NEXT[phase].get(cls, _SQL_NEXT[phase].get(tok))
    if nxt is None:
        return None
    return (nxt, n_sel, joined or phase == "on_c2")


def sql_allowed_next(prefix: Sequence[str]) -> tuple[str, ...]:
    """The tokens the SQL grammar allows after ``prefix`` (END when the query may stop): the mask of a
    grammar-constrained SQL decoder. Raises ValueError when ``prefix`` is not a prefix of a grammatical query."""
    state = _SQL_START
    for i, t in enumerate(_check_tokens(prefix, "prefix")):
        state = _sql_step(state, t)
        if state is None:
            raise ValueError(f"prefix is not grammatical SQL: token {i} ({t!r}) is not allowed there")
    return _sql_allowed(state)


def sql_grammatical(tokens: Sequence[str]) -> bool:
    """Whether ``tokens`` is a complete query of the SQL grammar (:func:`sql_allowed_next`)."""
    state = _SQL_START
    for t in _check_tokens(tokens, "tokens"):
        state = _sql_step(state, t)
        if state is None:
            return False
    return END in _sql_allowed(state)


_SQL_NEAR = {"kw": _SQL_KW, "punct": _SQL_PUNCT, "table": TABLES, "col": _SQL_COLS, "op": OPS,
             "text": TEXT_LITERALS, "int": INT_LITERALS}
_SQL_HALLUC = {"table": ["customer", "product", "sales"], "col": _DSL_HALLUC["col"], "op": ["=>", "=<"],
               "text": _DSL_HALLUC["text"], "int": ["'2021'", "2O21"]}
_DSL_NEAR = {"kw": KEYWORDS, "table": TABLES, "func": FUNCS, "col": tuple(SCHEMA), "op": OPS,
             "text": TEXT_LITERALS, "int": INT_LITERALS, "dir": DIRS}


def _wrong(rng: np.random.Generator, gold: str, near: Sequence[str], halluc: Sequence[str],
           oov_share: float = 0.5) -> str:
    """A wrong token: with probability ``oov_share`` a hallucination or slip (outside the vocabulary), else a
    confusion inside the vocabulary (the default, 0.5: half and half)."""
    pool = [t for t in near if t != gold]
    if halluc and (not pool or rng.random() < oov_share):
        return str(rng.choice(halluc))
    return str(rng.choice(pool))


def _eps_rates(eps: object) -> tuple[float, dict[str, float] | None]:
    """``eps`` as (a number, per-class rates or None): a probability, or a mapping token class -> probability."""
    if isinstance(eps, Mapping):
        rates = {}
        for k, v in eps.items():
            V.instance("eps key", k, str)
            rates[k] = V.probability(f"eps[{k!r}]", v)
        return 0.0, rates
    return V.probability("eps", eps), None


def corrupt(tokens: Sequence[str], eps: float | Mapping[str, float], rng: np.random.Generator, interface: str,
            destructive_rate: float | None = None, oov_share: float = 0.5) -> tuple[list[str], int]:
    """The noisy policy: each decision of the gold action ``tokens`` is wrong with probability ``eps``.

    ``eps`` may instead map token classes to rates (an error *profile*, e.g. measured on a learned agent,
    :func:`token_error_profile`): a token of class ``c`` (:func:`token_class`) is wrong with ``eps.get(c, 0)``;
    the destructive rate then defaults to 0.

    ``interface``: ``"sql"`` (free SQL text; a whole program is replaced by a destructive statement with
    probability ``destructive_rate``, default ``eps / 10``), ``"dsl"`` (DSL tokens; a destructive intent becomes a
    ``drop`` token) or ``"constrained"`` (DSL with constrained decoding: a wrong decision is drawn among the
    verifier-valid alternatives only, and writes are not expressible). ``oov_share``: the probability that a
    wrong token of the ``"sql"``/``"dsl"`` interfaces is a hallucination or slip outside the vocabulary rather
    than a confusion inside it (0: only in-vocabulary confusions, as a model with a closed output vocabulary
    makes). Returns ``(action, n_wrong_decisions)``.
    """
    eps, rates = _eps_rates(eps)
    oov_share = V.probability("oov_share", oov_share)
    V.one_of("interface", interface, ("sql", "dsl", "constrained"))
    tokens = _check_tokens(tokens)
    V.instance("rng", rng, np.random.Generator)
    if destructive_rate is not None:
        delta = V.probability("destructive_rate", destructive_rate)
    else:
        delta = 0.0 if rates is not None else eps / 10

    def rate(tok: str) -> float:
        return eps if rates is None else rates.get(token_class(tok, "sql" if interface == "sql" else "dsl"), 0.0)

    if interface == "constrained":
        gold, out, n, state = [*tokens, END], [], 0, _START
        while True:
            allowed = _allowed(state)
            i = len(out)
            if i < len(gold) and gold[i] in allowed:
                intended = gold[i]
            else:  # off the gold path: finish as soon as the grammar allows
                intended = END if END in allowed else allowed[0]
            alts = [t for t in allowed if t != intended]
            tok = intended
            if alts and rng.random() < rate(intended):
                tok, n = str(rng.choice(alts)), n + 1
            if tok == END:
                return out, n
            out.append(tok)
            state = _step(state, tok)[0]
    if rng.random() < delta:
        return (list(_DESTRUCTIVE_SQL[rng.integers(len(_DESTRUCTIVE_SQL))]) if interface == "sql"
                else ["drop", str(tokens[1]) if len(tokens) > 1 else "orders"]), 1
    out, n = [], 0
    for tok in tokens:
        if rng.random() < rate(tok):
            n += 1
            if interface == "sql":
                c = _sql_class(tok)
                halluc = [_SQL_SLIPS[tok]] if tok in _SQL_SLIPS else _SQL_HALLUC.get(c, [])
                tok = _wrong(rng, tok, _SQL_NEAR[c], halluc, oov_share)
            else:
                c = _lex(tok)
                tok = _wrong(rng, tok, _DSL_NEAR[c], _DSL_HALLUC[c], oov_share)
        out.append(tok)
    return out, n


# Error injection: one function per error class, each turning a gold program into one with exactly that error.
def inject_error(tokens: Sequence[str], kind: str, rng: np.random.Generator) -> list[str] | None:
    """A copy of the valid program ``tokens`` with one injected error of class ``kind`` (None if not applicable)."""
    V.one_of("kind", kind, ERROR_KINDS)
    t = _check_tokens(tokens)
    V.instance("rng", rng, np.random.Generator)
    p = parse(t)
    i_col = t.index("select") + 2
    scope = {p.table, p.join}
    if kind == "syntax":
        return t[:i_col] + [t[i_col - 1]] + t[i_col:]  # a repeated function name
    if kind == "missing_clause":
        return t[:t.index("select")]
    if kind == "write_forbidden":
        return ["drop", p.table]
    if kind == "unknown_table":
        return [t[0], {"customers": "customer", "orders": "purchases", "products": "product"}[p.table]] + t[2:]
    if kind == "unknown_function":
        return t[:i_col - 1] + ["average"] + t[i_col:]
    if kind == "unknown_column":
        return t[:i_col] + [p.col.split(".")[0] + ".amount"] + t[i_col + 1:]
    if kind == "column_not_in_scope":
        out_cols = [c for c in SCHEMA if SCHEMA[c].table not in scope and (p.func not in ("sum", "avg")
                                                                           or SCHEMA[c].numeric)]
        return t[:i_col] + [str(rng.choice(out_cols))] + t[i_col + 1:] if out_cols else None
    if kind == "bad_join":
        if p.join:
            return None
        bad = [x for x in TABLES if (p.table, x) not in FOREIGN_KEYS]
        return t[:2] + ["join", bad[0]] + t[2:]
    if kind == "type_mismatch":
        texts = [c for c in SCHEMA if SCHEMA[c].table in scope and not SCHEMA[c].numeric]
        if not texts:
            return None
        return t[:i_col - 1] + ["sum", str(rng.choice(texts))] + t[i_col + 1:]
    if kind == "bad_operator":
        if p.where:
            i = t.index("where")
            return t[:i + 2] + ["=>"] + t[i + 3:]
        num = [c for c in SCHEMA if SCHEMA[c].table in scope and SCHEMA[c].numeric]
        return _insert_where(t, p, ["where", num[0], "=>", "1"])
    if kind == "unknown_value":
        texts = [c for c in SCHEMA if SCHEMA[c].table in scope and not SCHEMA[c].numeric]
        if not texts:
            return None
        clause = ["where", texts[0], "=", "'Atlantis'"]
        return _insert_where(t, p, clause)
    if kind == "aggregation_error":
        if p.by is None:
            return None
        return t[:i_col - 1] + ["val"] + t[i_col:]
    raise AssertionError(kind)  # pragma: no cover


def _insert_where(t: list[str], p: Program, clause: list[str]) -> list[str] | None:
    if len(p.where) >= 2:
        return None
    i = len(t)
    for kw in ("by", "order", "limit"):
        if kw in t:
            i = min(i, t.index(kw))
    return t[:i] + clause + t[i:]


def valid_prefix_length(tokens: Sequence[str]) -> int:
    """The verifier's dense feedback: how many tokens (END included) come before the first error.

    A verified program of ``n`` tokens scores ``n + 1``.
    """
    tokens = _check_tokens(tokens)
    state = _START
    seq = [*tokens, END]
    for i, tok in enumerate(seq):
        state, err = _step(state, tok)
        if err is not None or state[7]:
            return i
    return len(seq)


# ----------------------------------------------------------------------------------------------------------------
# Case 2: Blocksworld, raw actions vs a precondition-checking verifier
# ----------------------------------------------------------------------------------------------------------------
State = frozenset  # a frozenset of towers, each a tuple of blocks from bottom to top


def bw_blocks(n: int) -> tuple[str, ...]:
    """The block names of an ``n``-block world (1 <= n <= 8)."""
    n = V.integer("n", n, min=1, max=8)
    return tuple("ABCDEFGH"[:n])


def _partitions(items: list[str]):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _partitions(rest):
        for i in range(len(part)):
            yield part[:i] + [[first, *part[i]]] + part[i + 1:]
        yield [[first], *part]


def bw_states(n: int) -> list[State]:
    """Every Blocksworld state with ``n`` blocks (sets of ordered towers)."""
    from itertools import permutations

    blocks = list(bw_blocks(n))
    out = set()
    for part in _partitions(blocks):
        for perms in _product([list(permutations(g)) for g in part]):
            out.add(frozenset(perms))
    return sorted(out, key=lambda s: sorted(s))


def _product(lists):
    if not lists:
        yield ()
        return
    for x in lists[0]:
        for rest in _product(lists[1:]):
            yield (x, *rest)


def bw_raw_actions(n: int) -> list[tuple[str, str]]:
    """The raw action space: every ``move(x, y)`` with ``y`` a block or ``"table"``, ``x != y`` (n*n actions)."""
    b = bw_blocks(n)
    return [(x, y) for x in b for y in (*b, "table") if x != y]


def bw_check(state: State, action: tuple[str, str]) -> str | None:
    """The plan verifier: None if ``move(x, y)`` is applicable in ``state``, else which precondition fails."""
    return _bw_check(_bw_state("state", state), _bw_action(action))


def _bw_state(name: str, state: object) -> State:
    """A Blocksworld state: a frozenset of non-empty towers (tuples of distinct block names)."""
    if not isinstance(state, frozenset) or not all(isinstance(t, tuple) and t and all(isinstance(b, str) for b in t)
                                                   for t in state):
        raise TypeError(f"{name} must be a frozenset of towers (non-empty tuples of block names), "
                        f"got {V.describe(state)}")
    blocks = [b for t in state for b in t]
    if not blocks or len(set(blocks)) != len(blocks):
        raise ValueError(f"{name} must hold each block once and at least one block, got {sorted(blocks)}")
    return state


def _bw_action(action: object) -> tuple[str, str]:
    if not isinstance(action, tuple) or len(action) != 2 or not all(isinstance(a, str) for a in action):
        raise TypeError(f"action must be a pair (block, block or 'table') of str, got {V.describe(action)}")
    return action


def _bw_check(state: State, action: tuple[str, str]) -> str | None:
    x, y = action
    tops = {t[-1] for t in state}
    where = {b: (t, i) for t in state for i, b in enumerate(t)}
    if x not in where:
        return f"unknown block {x!r}"
    if y != "table" and y not in where:
        return f"unknown destination {y!r}"
    if x not in tops:
        return f"{x} is not clear"
    if y != "table" and y not in tops:
        return f"{y} is not clear"
    t, i = where[x]
    if y == "table" and i == 0:
        return f"{x} is already on the table"
    return None


def bw_apply(state: State, action: tuple[str, str]) -> State:
    """Apply a valid move (raises ValueError with the failed precondition otherwise)."""
    err = bw_check(state, action)
    if err:
        raise ValueError(f"action move{action} is invalid: {err}")
    return _bw_apply(state, action)


def _bw_apply(state: State, action: tuple[str, str]) -> State:
    x, y = action
    towers = [list(t) for t in state]
    for t in towers:
        if t[-1] == x:
            t.pop()
    towers = [t for t in towers if t]
    if y == "table":
        towers.append([x])
    else:
        next(t for t in towers if t[-1] == y).append(x)
    return frozenset(tuple(t) for t in towers)


def bw_bfs(start: State, goal: State, masked: bool) -> tuple[list[tuple[str, str]], int, int]:
    """Breadth-first planning: ``(plan, nodes_expanded, invalid_actions_executed)``.

    Unmasked, every raw action of an expanded node is sent to the simulator, and the invalid ones fail there;
    masked, the verifier removes them before they are tried.
    """
    start, goal = _bw_state("start", start), _bw_state("goal", goal)
    if sorted(b for t in start for b in t) != sorted(b for t in goal for b in t):
        raise ValueError("start and goal must hold the same blocks")
    masked = V.boolean("masked", masked)
    n = sum(len(t) for t in start)
    if sorted(b for t in start for b in t) != list(bw_blocks(n)):
        raise ValueError(f"start must hold the blocks {bw_blocks(n)} (see bw_blocks)")
    actions = bw_raw_actions(n)
    parent: dict[State, tuple] = {start: (None, None)}
    queue, expanded, invalid = deque([start]), 0, 0
    while queue:
        s = queue.popleft()
        if s == goal:
            plan = []
            while parent[s][0] is not None:
                s, a = parent[s]
                plan.append(a)
            return plan[::-1], expanded, invalid
        expanded += 1
        for a in actions:
            if _bw_check(s, a) is not None:
                invalid += not masked
                continue
            s2 = _bw_apply(s, a)
            if s2 not in parent:
                parent[s2] = (s, a)
                queue.append(s2)
    raise ValueError("goal unreachable")  # pragma: no cover


def bw_graph(n: int) -> dict[State, dict[tuple[str, str], State]]:
    """The verifier-valid moves of every state: ``graph[s][action] = next state``."""
    actions = bw_raw_actions(n)
    return {s: {a: _bw_apply(s, a) for a in actions if _bw_check(s, a) is None} for s in bw_states(n)}


def bw_distances(goal: State, graph: dict | None = None) -> dict[State, int]:
    """Shortest-plan length from every state to ``goal`` (BFS on the reversible move graph)."""
    goal = _bw_state("goal", goal)
    graph = bw_graph(sum(len(t) for t in goal)) if graph is None else _bw_graph_arg(graph, goal)
    dist, queue = {goal: 0}, deque([goal])
    while queue:
        s = queue.popleft()
        for s2 in graph[s].values():
            if s2 not in dist:
                dist[s2] = dist[s] + 1
                queue.append(s2)
    return dist


def _bw_graph_arg(graph: object, state: State) -> dict:
    V.instance("graph", graph, dict)
    if state not in graph:
        raise ValueError(f"graph must be bw_graph(n) for this world; it has no state {sorted(state)}")
    return graph


def bw_episode(start: State, goal: State, dist: dict[State, int], eps: float, masked: bool,
               rng: np.random.Generator, max_steps: int | None = None, graph: dict | None = None
               ) -> tuple[bool, int, int]:
    """A noisy planner: each step takes an optimal move with probability ``1 - eps``, else a random action from
    its action space (raw: all ``move(x, y)``; masked: only verifier-valid moves).

    An invalid raw action reaches the simulator and ends the episode (the environment errors). Returns
    ``(reached_goal, invalid_actions_executed, invalid_actions_masked)``.
    """
    start, goal = _bw_state("start", start), _bw_state("goal", goal)
    V.instance("dist", dist, dict)
    if dist.get(goal) != 0 or start not in dist:
        raise ValueError("dist must be bw_distances(goal): distance 0 at goal and an entry for start")
    eps = V.probability("eps", eps)
    masked = V.boolean("masked", masked)
    V.instance("rng", rng, np.random.Generator)
    n = sum(len(t) for t in start)
    actions = bw_raw_actions(n)
    graph = bw_graph(n) if graph is None else _bw_graph_arg(graph, start)
    max_steps = 3 * dist[start] + 2 * n if max_steps is None else V.integer("max_steps", max_steps, min=0)
    s, masked_out = start, 0
    for _ in range(max_steps):
        if s == goal:
            return True, 0, masked_out
        valid = list(graph[s])
        if rng.random() < eps:
            if masked:
                masked_out += len(actions) - len(valid)
                a = valid[rng.integers(len(valid))]
            else:
                a = actions[rng.integers(len(actions))]
        else:
            best = [a for a in valid if dist[graph[s][a]] == dist[s] - 1]
            a = best[rng.integers(len(best))]
        if a not in graph[s]:
            return False, 1, masked_out
        s = graph[s][a]
    return s == goal, 0, masked_out


def binomial_z(successes: int, probs: Sequence[float]) -> float:
    """z-score of ``successes`` against independent Bernoulli trials with success probabilities ``probs``."""
    successes = V.integer("successes", successes, min=0)
    p = V.array("probs", probs, ndim=1, dtype="float", min=0, max=1)
    if successes > len(p):
        raise ValueError(f"successes must be at most the number of trials len(probs)={len(p)}, got {successes}")
    var = float((p * (1 - p)).sum())
    mean = float(p.sum())
    if var == 0:
        return 0.0 if successes == mean else math.inf
    return (successes - mean) / math.sqrt(var)


# ----------------------------------------------------------------------------------------------------------------
# Case 1: one episode of the noisy agent behind an interface (retries with feedback)
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class Episode:
    """What happened: ``success_at`` = attempt index of the first correct result (None: never), ``exact`` = the
    first action equals the gold action, counts of invalid actions that reached execution / were caught before,
    harmful writes that reached the database, and verified programs that still failed at execution."""

    success_at: int | None
    exact: bool
    invalid_executed: int = 0
    caught: int = 0
    harmful: int = 0
    verified_failed: int = 0


def _cached_execute(con, sql: list[str], cache: dict | None):
    key = " ".join(sql)
    if cache is not None and key in cache:
        return cache[key]
    out = execute(con, key)
    if cache is not None:
        cache[key] = out
    return out


def agent_episode(con: sqlite3.Connection, intent: Intent, interface: str, eps: float | Mapping[str, float],
                  rng: np.random.Generator, retries: int = 0, cache: dict | None = None,
                  sql_repair: bool = False, oov_share: float = 0.5) -> Episode:
    """The noisy agent answers ``intent`` through ``interface`` with up to ``retries`` retries.

    * ``"sql"``: the SQL text goes straight to the database; an execution error comes back as an unstructured
      message and the agent writes the whole query again; a write that reaches the database ends the episode.
    * ``"dsl"``: the verifier runs first; an invalid program never executes, and its structured errors name the
      token positions, so the agent redraws only those tokens (the whole program for a missing clause or write).
    * ``"constrained"``: the decoder only emits verifier-valid tokens, so there is nothing to catch or retry.

    ``eps``: a per-decision error rate or a per-class error profile (see :func:`corrupt`). ``sql_repair``: SQL
    retries redraw only the token SQLite's message names (:func:`sqlite_error_position`) when it names one,
    instead of rewriting the whole query. ``oov_share``: see :func:`corrupt` (every draw of the episode uses it).
    """
    V.instance("con", con, sqlite3.Connection)
    V.instance("intent", intent, Intent)
    V.one_of("interface", interface, ("sql", "dsl", "constrained"))
    _eps_rates(eps)
    sql_repair = V.boolean("sql_repair", sql_repair)
    V.instance("rng", rng, np.random.Generator)
    retries = V.integer("retries", retries, min=0)
    V.optional(V.instance, "cache", cache, dict)
    gold = list(intent.sql if interface == "sql" else intent.program)
    prog, _ = corrupt(gold, eps, rng, interface, oov_share=oov_share)
    ep = Episode(success_at=None, exact=prog == gold)
    for attempt in range(retries + 1):
        if interface == "sql":
            status, out = _cached_execute(con, prog, cache)
            if status == "harmful":
                ep.harmful += 1
                ep.invalid_executed += 1
                return ep
            if status == "error":
                ep.invalid_executed += 1
                pos = sqlite_error_position(prog, out) if sql_repair else None
                if pos is not None and len(prog) == len(gold) and pos < len(gold):
                    prog[pos] = corrupt([gold[pos]], eps, rng, "sql", destructive_rate=0.0, oov_share=oov_share)[0][0]
                else:
                    prog, _ = corrupt(gold, eps, rng, "sql", oov_share=oov_share)
                continue
        else:
            v = verify(prog)
            if not v.ok:
                ep.caught += 1
                fatal = {"write_forbidden", "missing_clause"} & {e.kind for e in v.errors}
                if fatal or len(prog) != len(gold):
                    prog, _ = corrupt(gold, eps, rng, interface, oov_share=oov_share)
                else:  # structured feedback: redraw only the flagged tokens
                    for e in v.errors:
                        i = min(e.position, len(gold) - 1)
                        prog[i] = corrupt([gold[i]], eps, rng, "dsl", destructive_rate=0.0,
                                      oov_share=oov_share)[0][0]
                continue
            status, out = _cached_execute(con, compile_sql(prog), cache)
            if status != "ok":
                ep.verified_failed += 1
                ep.invalid_executed += 1
                return ep
        if results_equal(out, intent.result):
            ep.success_at = attempt
        return ep  # a wrong but valid answer is not noticed by the agent
    return ep


# ----------------------------------------------------------------------------------------------------------------
# Case 3: learning to write one program with REINFORCE, sparse reward vs verifier feedback
# ----------------------------------------------------------------------------------------------------------------
_OUT_VOCAB = (*DSL_VOCAB, END)
_OUT_INDEX = {t: i for i, t in enumerate(_OUT_VOCAB)}
ARMS = ("sparse", "verifier_reward", "verifier_filter")


def reinforce_program(con: sqlite3.Connection, intent: Intent, arm: str, steps: int, batch: int = 16,
                      lr: float = 1.0, seed: int = 0, cache: dict | None = None) -> dict[str, np.ndarray]:
    """Tabular REINFORCE (one softmax per output position over the DSL tokens and END, mean baseline) learning
    to write ``intent``'s program from its outcome.

    ``arm``: ``"sparse"`` (reward 1 when the executed result is correct, else 0); ``"verifier_reward"`` (plus the
    verifier's dense feedback, ``0.5 * min(valid_prefix_length, L + 1) / (L + 1)`` for a gold length ``L``);
    ``"verifier_filter"`` (the sparse reward, but samples are drawn only among verifier-valid continuations).
    Returns per-step ``success`` and ``valid`` rates of the sampled batch.
    """
    V.instance("con", con, sqlite3.Connection)
    V.instance("intent", intent, Intent)
    V.one_of("arm", arm, ARMS)
    steps, batch = V.integer("steps", steps, min=1), V.integer("batch", batch, min=2)
    lr, seed = V.positive("lr", lr), V.seed("seed", seed)
    V.optional(V.instance, "cache", cache, dict)
    rng = np.random.default_rng([seed, 3])
    n_pos, n_vocab = MAX_PROGRAM_LEN + 1, len(_OUT_VOCAB)  # every valid program fits, END included
    L1 = len(intent.program) + 1
    theta = np.zeros((n_pos, n_vocab))  # the policy: one row of logits per output position
    succ, valid = np.zeros(steps), np.zeros(steps)
    end = _OUT_INDEX[END]
    for step in range(steps):
        if arm == "verifier_filter":
            traces, programs = [], []
            for _ in range(batch):
                toks, trace, state = [], [], _START
                for pos in range(n_pos):
                    idx = _allowed_idx(state)  # the verifier as a filter: only valid continuations
                    p = np.exp(theta[pos, idx] - theta[pos, idx].max())
                    p /= p.sum()
                    k = min(int(np.searchsorted(np.cumsum(p), rng.random())), len(idx) - 1)
                    trace.append((pos, idx, p, k))
                    if idx[k] == end:
                        break
                    toks.append(_OUT_VOCAB[idx[k]])
                    state = _step(state, toks[-1])[0]
                traces.append(trace)
                programs.append(toks)
        else:  # unconstrained: every position's token drawn at once, the program ends at the first END
            P = np.exp(theta - theta.max(1, keepdims=True))
            P /= P.sum(1, keepdims=True)
            draws = (P.cumsum(1)[None] < rng.random((batch, n_pos, 1))).sum(2).clip(max=n_vocab - 1)  # (batch, n_pos)
            is_end = draws == end
            used = np.where(is_end.any(1), is_end.argmax(1) + 1, n_pos)  # positions that were decided
            programs = [[_OUT_VOCAB[k] for k in draws[b_, :used[b_]] if k != end] for b_ in range(batch)]
        rewards = np.zeros(batch)
        for b_, toks in enumerate(programs):
            ok = verify(toks).ok
            good = ok and results_equal(_cached_execute(con, compile_sql(toks), cache)[1], intent.result)
            rewards[b_] = float(good)
            if arm == "verifier_reward":  # dense feedback: how far the program got before its first error
                rewards[b_] += 0.5 * min(valid_prefix_length(toks), L1) / L1
            succ[step] += good / batch
            valid[step] += ok / batch
        adv = rewards - rewards.mean()  # REINFORCE with the batch mean as baseline
        if not adv.any():
            continue
        if arm == "verifier_filter":
            for trace, a in zip(traces, adv):
                for pos, idx, p, k in trace:  # grad of log softmax: onehot(k) - p
                    g = -p * a
                    g[k] += a
                    theta[pos, idx] += lr * g / batch
        else:
            mask = np.arange(n_pos)[None] < used[:, None]  # (batch, n_pos)
            grad = np.zeros_like(theta)
            bi, pi = np.nonzero(mask)
            np.add.at(grad, (pi, draws[bi, pi]), adv[bi])
            grad -= (adv[:, None] * mask).sum(0)[:, None] * P
            theta += lr * grad / batch
    return {"success": succ, "valid": valid}


MAX_PROGRAM_LEN = 21  # from T join T select F C, two where clauses, by, order, limit
_ALL_IDX = np.arange(len(_OUT_VOCAB))


@cache
def _allowed_idx(state: tuple) -> np.ndarray:
    return np.array([_OUT_INDEX[t] for t in _allowed(state)])


def steps_to_level(curve: Sequence[float], level: float, window: int = 20) -> int | None:
    """First step at which the mean of ``curve`` over the last ``window`` steps reaches ``level`` (None: never).

    Only full windows count (a curve shorter than ``window`` is one window): a mean over the first one or two
    batches can cross the level by chance, so the earliest step that can be returned is ``window``."""
    c = V.array("curve", curve, ndim=1, dtype="float").astype(float)
    level = V.number("level", level)
    window = V.integer("window", window, min=1)
    w = min(window, len(c))
    run = np.convolve(c, np.ones(w) / w, mode="valid")
    hit = np.nonzero(run >= level)[0]
    return int(hit[0]) + w if len(hit) else None


# ----------------------------------------------------------------------------------------------------------------
# Case 4: a learned agent (a small transformer from request to program), decoding, repair, bits per intent
# ----------------------------------------------------------------------------------------------------------------
AGENT_INTERFACES = ("dsl", "sql")
SEP, PAD = "<sep>", "<pad>"
_REQUEST_WORDS = tuple(sorted(
    {w for v in WORDS.values() for w in v.split()} | set(TABLES) | {v.strip("'") for v in TEXT_LITERALS}
    | set(INT_LITERALS) | {"1", "3", "5", "10", "per", "from", "with", "where", "top", ","}))


# Paraphrased requests (round 3): sentence frames ("templates") and wording that differ between training and
# test. Every content word (functions, columns, operators, directions) has synonyms that occur in both splits;
# the test split uses frames never seen in training and opens with a filler phrase whose words never occur in
# training (an agent trained from scratch has no meaning for them: it must ignore them).
_P_FUNC = {"val": ("list", "show"), "count": ("count of", "number of"), "sum": ("total", "sum of"),
           "avg": ("average", "mean"), "min": ("smallest", "minimum"), "max": ("largest", "maximum")}
_P_COL = {"customers.city": ("city",), "customers.segment": ("segment",),
          "customers.age": ("age", "customer age"), "products.category": ("category", "product category"),
          "products.price": ("price", "product price"), "products.rating": ("rating",),
          "orders.quantity": ("quantity", "units"), "orders.total": ("order value", "order total"),
          "orders.year": ("year", "order year")}
_P_OP = {"=": ("is", "equals"), "!=": ("is not", "not"), "<": ("below", "under", "less than"),
         "<=": ("at most", "up to"), ">": ("above", "over", "more than"), ">=": ("at least", "no less than")}
_P_DIR = {"desc": ("highest first", "descending"), "asc": ("lowest first", "ascending")}
_P_GROUP = ("per", "for each", "by")
_P_JOIN = ("with", "joined with", "and")
_P_LIMIT = ("top", "first", "only")
_P_FILLER = {"train": ("", "please", "i need", "tell me"), "test": ("kindly", "could you", "report")}
# templates 0-3 are the training frames, 4-5 the held-out ones (see paraphrase_request)
PARA_TEMPLATES = {"train": (0, 1, 2, 3), "test": (4, 5)}


def paraphrase_request(tokens: Sequence[str], template: int, rng: np.random.Generator,
                       filler: str | None = None) -> str:
    """An English request for a verified DSL program in sentence frame ``template`` (0-5), with synonyms drawn
    from ``rng`` and an optional leading ``filler`` phrase. Frames (optional parts in brackets):

    0. ``F [G] S [, where W and W] [, O] [, L]``        1. ``S : F [G] [, with W and W] [, O] [, L]``
    2. ``[L] F [G] S [if W , W] [, O]``                 3. ``[for W and W ,] F [G] S [, O] [, L]``
    4. ``S [, whose W and W] : [O ,] F [G] [, L]``      5. ``[O ,] F [G] [, if W and W] , S [, L]``

    (F: function and column, G: grouping, S: tables, W: a condition, O: order, L: limit.)
    """
    p = parse(tokens)
    template = V.integer("template", template, min=0, max=5)
    V.instance("rng", rng, np.random.Generator)
    if filler is not None and filler not in _P_FILLER["train"] + _P_FILLER["test"]:
        raise ValueError(f"filler must be one of {_P_FILLER['train'] + _P_FILLER['test']}, got {filler!r}")

    def pick(options):
        return str(options[rng.integers(len(options))])

    F = f"{pick(_P_FUNC[p.func])} {pick(_P_COL[p.col])}"
    G = f" {pick(_P_GROUP)} {pick(_P_COL[p.by])}" if p.by else ""
    S = f"{pick(('from', 'in'))} {p.table}" + (f" {pick(_P_JOIN)} {p.join}" if p.join else "")
    W = [f"{pick(_P_COL[c])} {pick(_P_OP[op])} {v.strip(chr(39))}" for c, op, v in p.where]
    Od = pick(_P_DIR[p.order]) if p.order else ""
    L = f"{pick(_P_LIMIT)} {p.limit}" if p.limit else ""
    and_w = " and ".join(W)
    if template == 0:
        parts = [F + G + " " + S, f"where {and_w}" if W else "", Od, L]
    elif template == 1:
        parts = [f"{S} : {F}{G}", f"with {and_w}" if W else "", Od, L]
    elif template == 2:
        parts = [(L + " " if L else "") + F + G + " " + S + (" if " + " , ".join(W) if W else ""), Od]
    elif template == 3:
        parts = [f"for {and_w}" if W else "", F + G + " " + S, Od, L]
    elif template == 4:
        parts = [S + (f" , whose {and_w}" if W else "") + " :", Od, F + G, L]
        return _join_request(filler, parts[0] + " " + " , ".join(x for x in parts[1:] if x))
    else:
        parts = [Od, F + G, f"if {and_w}" if W else "", S, L]
    return _join_request(filler, " , ".join(x for x in parts if x))


def _join_request(filler: str | None, text: str) -> str:
    return f"{filler} {text}" if filler else text


def paraphrase_intents(intents: Sequence[Intent], split: str, seed: int = 0) -> list[Intent]:
    """The same intents (programs, SQL, rows) with paraphrased requests: ``split="train"`` draws frames 0-3
    and the training fillers (often none), ``"test"`` frames 4-5 and always a filler whose words never occur in
    training (:data:`PARA_TEMPLATES`). Deterministic in ``seed``."""
    intents = V.sequence("intents", intents, of=lambda k, x: V.instance(k, x, Intent), min_len=1)
    V.one_of("split", split, tuple(PARA_TEMPLATES))
    seed = V.seed("seed", seed)
    rng = np.random.default_rng([seed, 63, ("train", "test").index(split)])
    frames, fillers = PARA_TEMPLATES[split], _P_FILLER[split]
    out = []
    for it in intents:
        t = int(frames[rng.integers(len(frames))])
        f = str(fillers[rng.integers(len(fillers))])
        req = paraphrase_request(it.program, t, rng, f or None)
        out.append(Intent(req, it.program, it.sql, it.result))
    return out


def _para_words() -> tuple[str, ...]:
    words = set()
    for table in (_P_FUNC, _P_COL, _P_OP, _P_DIR):
        for forms in table.values():
            words |= {w for f in forms for w in f.split()}
    for forms in (_P_GROUP, _P_JOIN, _P_LIMIT, *_P_FILLER.values()):
        words |= {w for f in forms for w in f.split()}
    words |= {"from", "in", "where", "with", "if", "for", "whose", "and", ":", ","}
    return tuple(sorted(words - set(_REQUEST_WORDS)))


_PARA_EXTRA = _para_words()
_PARA_SET = frozenset(_PARA_EXTRA)


def request_tokens(text: str) -> list[str]:
    """The words of a request made by :func:`render_request` or :func:`paraphrase_request` (commas and colons
    are their own tokens)."""
    V.instance("text", text, str)
    toks = text.replace(",", " ,").replace(":", " :").split()
    bad = [t for t in toks if t not in _REQUEST_WORDS and t not in _PARA_SET]
    if bad:
        raise ValueError(f"text holds words outside the request vocabulary: {bad[:5]}")
    return toks


def agent_vocab(interface: str, paraphrase: bool = False) -> tuple[str, ...]:
    """The agent's token vocabulary: request words, ``<sep>``, the interface's output tokens, END and ``<pad>``;
    ``paraphrase``: followed by the extra words of paraphrased requests (:func:`paraphrase_request`), so every
    shared token keeps its index."""
    V.one_of("interface", interface, AGENT_INTERFACES)
    paraphrase = V.boolean("paraphrase", paraphrase)
    out = DSL_VOCAB if interface == "dsl" else tuple(dict.fromkeys(sql_vocab()))
    base = (*_REQUEST_WORDS, SEP, *out, END, PAD)
    if not paraphrase:
        return base
    # a paraphrase word that is already a token (e.g. the DSL keyword "by") keeps that token's index
    return (*base, *(w for w in _PARA_EXTRA if w not in set(base)))


def _gold(intent: Intent, interface: str) -> list[str]:
    return list(intent.program if interface == "dsl" else intent.sql)


def encode(intents: Sequence[Intent], interface: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Teacher-forcing batch: token ids ``(B, T)`` of ``request <sep> output END`` (right-padded) and a boolean
    mask ``(B, T)`` of the positions whose *next* token is an output token (where the loss is taken)."""
    V.one_of("interface", interface, AGENT_INTERFACES)
    V.sequence("intents", intents, of=lambda k, x: V.instance(k, x, Intent), min_len=1)
    vocab = {t: i for i, t in enumerate(agent_vocab(interface, True))}
    seqs, starts = [], []
    for it in intents:
        req = request_tokens(it.request)
        seqs.append([vocab[t] for t in [*req, SEP, *_gold(it, interface), END]])
        starts.append(len(req))
    T = max(map(len, seqs))
    ids = torch.full((len(seqs), T), vocab[PAD], dtype=torch.long)
    loss_at = torch.zeros((len(seqs), T), dtype=torch.bool)
    for b, (s, st) in enumerate(zip(seqs, starts)):
        ids[b, :len(s)] = torch.tensor(s)
        loss_at[b, st:len(s) - 1] = True
    return ids, loss_at


def make_agent(interface: str, d_model: int = 64, n_layer: int = 2, n_head: int = 4,
               paraphrase: bool = False) -> Transformer:
    """A small decoder-only transformer (learned positions) over :func:`agent_vocab` (``paraphrase``: with the
    words of paraphrased requests); build it under a seed."""
    V.one_of("interface", interface, AGENT_INTERFACES)
    cfg = TransformerConfig(vocab_size=len(agent_vocab(interface, paraphrase)), n_layer=n_layer, n_head=n_head,
                            d_model=d_model, max_len=96, pos="learned")
    return Transformer(cfg)


def train_agent(model: torch.nn.Module, intents: Sequence[Intent], interface: str, steps: int, batch: int = 32,
                lr: float = 3e-3, seed: int = 0) -> list[float]:
    """Supervised training (cross-entropy on the output tokens, AdamW, cosine decay); returns the loss per step."""
    V.instance("model", model, torch.nn.Module)
    steps, batch = V.integer("steps", steps, min=1), V.integer("batch", batch, min=1)
    lr, seed = V.positive("lr", lr), V.seed("seed", seed)
    ids, loss_at = encode(intents, interface)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * s / steps)))
    losses = []
    model.train()
    for _ in range(steps):
        b = torch.randint(len(ids), (min(batch, len(ids)),), generator=g)
        x, m = ids[b], loss_at[b]
        T = int(m.nonzero()[:, 1].max()) + 2
        logits = model(x[:, :T - 1])
        loss = torch.nn.functional.cross_entropy(logits[m[:, :T - 1]], x[:, 1:T][m[:, :T - 1]])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def decode(model: torch.nn.Module, intent: Intent, interface: str, constrained: bool = False,
           disabled: Sequence[str] = (), prefix: Sequence[str] = (), banned: dict | None = None,
           max_new: int = 48) -> list[str]:
    """Greedy decoding of the output after ``intent``'s request, continuing ``prefix``.

    ``constrained``: the logits are masked to the verifier-valid next tokens (DSL: :func:`allowed_next`, with
    ``disabled`` checks off) or, for SQL, to the tokens the SQL grammar allows next (:func:`sql_allowed_next`). ``banned[i]``: tokens not allowed at output position ``i`` (the repair loop's
    memory). Returns the output tokens without END.
    """
    V.instance("model", model, torch.nn.Module)
    V.instance("intent", intent, Intent)
    V.one_of("interface", interface, AGENT_INTERFACES)
    constrained = V.boolean("constrained", constrained)
    off = _check_disabled(disabled)
    banned = {} if banned is None else V.instance("banned", banned, dict)
    max_new = V.integer("max_new", max_new, min=1)
    vocab = agent_vocab(interface, True)
    index = {t: i for i, t in enumerate(vocab)}
    out = list(_check_tokens(prefix, "prefix"))
    ids = [index[t] for t in [*request_tokens(intent.request), SEP, *out]]
    first_out = index[SEP] + 1
    state = _START if interface == "dsl" else _SQL_START
    if constrained:
        for t in out:
            state = _step(state, t)[0] if interface == "dsl" else _sql_step(state, t)
            if state is None:
                raise ValueError(f"prefix is not a prefix the SQL grammar accepts: {out}")
    while len(out) < max_new:
        logits = model(torch.tensor([ids[-model.cfg.max_len:]]))[0, -1].clone()
        logits[:first_out] = -math.inf  # never a request word or <sep>
        logits[index[PAD]:] = -math.inf  # nor <pad> or a paraphrase word
        if constrained:
            keep = torch.full_like(logits, -math.inf)
            allowed = _allowed(state, off) if interface == "dsl" else _sql_allowed(state)
            keep[[index[t] for t in allowed]] = 0.0
            logits += keep
        for t in banned.get(len(out), ()):
            logits[index[t]] = -math.inf
        if not torch.isfinite(logits).any():
            break
        tok = vocab[int(logits.argmax())]
        if tok == END:
            break
        out.append(tok)
        ids.append(index[tok])
        if constrained:
            state = _step(state, tok)[0] if interface == "dsl" else _sql_step(state, tok)
    return out


_SQLITE_NAMES = (r'near "([^"]+)"', r"no such column: (\S+)", r"no such table: (\S+)", r"no such function: (\S+)",
                 r"ambiguous column name: (\S+)")


def sqlite_error_position(sql: Sequence[str], message: str) -> int | None:
    """The output position that SQLite's error ``message`` names: the first token equal to the name it quotes
    (``len(sql)``, i.e. END, for an incomplete input); None when the message names no token of ``sql``."""
    import re

    sql = _check_tokens(sql, "sql")
    V.instance("message", message, str)
    if "incomplete input" in message:
        return len(sql)
    for pat in _SQLITE_NAMES:
        m = re.search(pat, message)
        if m:
            name = m.group(1).lower()
            for i, t in enumerate(sql):
                if t.lower() == name or t.lower().split(".")[-1] == name.split(".")[-1] and "." in name:
                    return i
    return None


@dataclass
class AgentResult:
    """One answer of the learned agent: ``success`` (correct rows), ``executed_invalid`` (an action that fails
    at the database or that the full verifier rejects reached execution), ``repairs`` used, the final output."""

    success: bool
    executed_invalid: bool
    repairs: int
    output: list[str]


def agent_answer(model: torch.nn.Module, con: sqlite3.Connection, intent: Intent, interface: str,
                 constrained: bool = False, repairs: int = 0, disabled: Sequence[str] = ()) -> AgentResult:
    """Answer ``intent`` with the learned agent, with up to ``repairs`` verifier-guided repairs.

    DSL: the verifier (with ``disabled`` checks off) runs before execution; on an error the token at its
    position is banned there and decoding resumes from that position. SQL: the query runs; when SQLite's message
    names a token (:func:`sqlite_error_position`) the same repair is made there; otherwise the agent stops.
    ``constrained``: DSL, verifier-constrained decoding; SQL, grammar-constrained decoding (:func:`decode`).
    """
    V.instance("con", con, sqlite3.Connection)
    repairs = V.integer("repairs", repairs, min=0)
    off = _check_disabled(disabled)
    banned: dict[int, set] = {}
    out = decode(model, intent, interface, constrained, off)
    for attempt in range(repairs + 1):
        if interface == "dsl":
            v = verify(out, off)
            if v.ok:
                status, rows = execute(con, compile_sql(out, off))
                invalid = status != "ok" or not verify(out).ok
                return AgentResult(status == "ok" and results_equal(rows, intent.result), invalid, attempt, out)
            pos = min(e.position for e in v.errors)
        else:
            status, rows = execute(con, out)
            if status == "ok":
                return AgentResult(results_equal(rows, intent.result), False, attempt, out)
            pos = sqlite_error_position(out, rows)
            if pos is None:
                return AgentResult(False, True, attempt, out)
        if attempt == repairs:
            break
        banned.setdefault(pos, set()).add(out[pos] if pos < len(out) else END)
        out = decode(model, intent, interface, constrained, off, prefix=out[:pos], banned=banned)
    return AgentResult(False, interface == "sql", repairs, out)


@torch.no_grad()
def bits_per_intent(model: torch.nn.Module, intents: Sequence[Intent], interface: str) -> np.ndarray:
    """Per intent, the bits the model needs to write the gold output: ``-sum log2 p(token | request, prefix)``
    over the output tokens and END (teacher forcing)."""
    V.instance("model", model, torch.nn.Module)
    ids, loss_at = encode(intents, interface)
    logp = torch.log_softmax(model(ids[:, :-1]), -1)
    tok_lp = logp.gather(-1, ids[:, 1:, None])[..., 0] * loss_at[:, :-1]
    return (-tok_lp.sum(1) / math.log(2)).numpy()


def token_class(tok: str, interface: str) -> str:
    """The class of an output token for error profiles: for ``"sql"`` keyword, punct, table, col, op, text, int;
    for ``"dsl"`` kw, table, func, col, op, text, int, dir (the classes :func:`corrupt` confuses within)."""
    V.instance("tok", tok, str)
    V.one_of("interface", interface, AGENT_INTERFACES)
    if not tok:
        raise ValueError("tok must be a non-empty token")
    return _sql_class(tok) if interface == "sql" else _lex(tok)


@torch.no_grad()
def token_error_profile(model: torch.nn.Module, intents: Sequence[Intent], interface: str) -> dict[str, list[int]]:
    """A learned agent's per-token errors by token class (teacher forcing on the gold outputs of ``intents``):
    ``class -> [wrong argmax predictions, gold tokens]`` (END not counted)."""
    V.instance("model", model, torch.nn.Module)
    intents = V.sequence("intents", intents, of=lambda k, x: V.instance(k, x, Intent), min_len=1)
    ids, loss_at = encode(intents, interface)
    if getattr(getattr(model, "cfg", None), "vocab_size", None) not in (len(agent_vocab(interface)),
                                                                         len(agent_vocab(interface, True))):
        raise ValueError(f"model must be a {interface.upper()} agent (make_agent({interface!r}, ...))")
    pred = model(ids[:, :-1]).argmax(-1)
    prof: dict[str, list[int]] = {}
    for b, it in enumerate(intents):
        start = int(loss_at[b].nonzero()[0, 0])
        for j, tok in enumerate(_gold(it, interface)):
            c = prof.setdefault(token_class(tok, interface), [0, 0])
            c[0] += int(pred[b, start + j] != ids[b, start + j + 1])
            c[1] += 1
    return prof


PARA_ARMS = ("dsl_constrained", "sql_free", "sql_grammar")  # the decoders of the paraphrase comparison


def paired_bootstrap(a: Sequence[float], b: Sequence[float], n_boot: int = 2000, seed: int = 0,
                     level: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``a - b`` over paired items (e.g. per-request success of two agents) and its percentile bootstrap
    interval at ``level`` (items resampled with replacement): ``(mean, low, high)``."""
    x = V.array("a", a, ndim=1, dtype="float").astype(float)
    y = V.array("b", b, ndim=1, dtype="float").astype(float)
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"a and b must be paired (same length >= 2), got {len(x)} and {len(y)}")
    n_boot, seed = V.integer("n_boot", n_boot, min=100), V.seed("seed", seed)
    level = V.number("level", level, min=0.5, max=0.999)
    d = x - y
    rng = np.random.default_rng([seed, 17])
    means = d[rng.integers(len(d), size=(n_boot, len(d)))].mean(1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(d.mean()), float(lo), float(hi)


def seed_interval(d: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean of per-seed paired differences ``d`` (e.g. DSL minus SQL held-out success, one per training seed)
    and its two-sided Student-t interval at ``level`` over seeds: ``(mean, low, high)``. Unlike
    :func:`paired_bootstrap` over requests, it counts the spread between training seeds."""
    from scipy import stats

    x = V.array("d", d, ndim=1, dtype="float").astype(float)
    if len(x) < 2 or not np.isfinite(x).all():
        raise ValueError(f"d must hold at least 2 finite per-seed differences, got {x.tolist()}")
    level = V.number("level", level, min=0.5, max=0.999)
    half = float(stats.t.ppf((1 + level) / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return float(x.mean()), float(x.mean()) - half, float(x.mean()) + half


def crossed_bootstrap(d: np.ndarray, n_boot: int = 2000, seed: int = 0,
                      level: float = 0.95) -> tuple[float, float, float]:
    """Mean of a seeds x requests table ``d`` of paired differences (e.g. DSL minus SQL success of one request
    at one training seed) and its percentile bootstrap interval at ``level`` with seeds **and** requests
    resampled, independently, with replacement: ``(mean, low, high)``. Unlike :func:`seed_interval` (seeds
    only, the requests held fixed) it also counts the draw of the held-out requests; resampling both ways
    double-counts their interaction, so it errs wide."""
    x = V.array("d", d, ndim=2, dtype="float").astype(float)
    if min(x.shape) < 2 or not np.isfinite(x).all():
        raise ValueError(f"d must be a finite seeds x requests table with >= 2 of each, got shape {x.shape}")
    n_boot, seed = V.integer("n_boot", n_boot, min=100), V.seed("seed", seed)
    level = V.number("level", level, min=0.5, max=0.999)
    rng = np.random.default_rng([seed, 23])
    n_s, n_r = x.shape
    means = np.array([x[np.ix_(rng.integers(n_s, size=n_s), rng.integers(n_r, size=n_r))].mean()
                      for _ in range(n_boot)])
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(x.mean()), float(lo), float(hi)


def read_n_train(success: Mapping[int, Sequence[float]], level: float = 0.5) -> int:
    """The sample-efficiency reading rule: the smallest training-set size ``n`` whose ``success[n]`` (the mean
    held-out success of each agent / decoder at that size) reaches ``level`` for at least one of them; the
    largest size when none does."""
    V.instance("success", success, Mapping)
    if not success:
        raise ValueError("success must map at least one training-set size to success rates")
    level = V.probability("level", level)
    sizes = sorted(V.integer("n_train", n, min=1) for n in success)
    for n in sizes:
        vals = V.array(f"success[{n}]", success[n], ndim=1, dtype="float", min=0, max=1)
        if len(vals) and vals.max() >= level:
            return n
    return sizes[-1]


def para_steps(n_train: int, steps: int, batch: int, min_epochs: float) -> int:
    """Training steps of a paraphrase agent on ``n_train`` requests: ``steps``, or more where that would be fewer
    than ``min_epochs`` passes over the data (``ceil(min_epochs * n_train / batch)``); one rule for every size."""
    n_train, steps = V.integer("n_train", n_train, min=1), V.integer("steps", steps, min=1)
    batch, min_epochs = V.integer("batch", batch, min=1), V.number("min_epochs", min_epochs, min=0)
    return max(steps, math.ceil(min_epochs * n_train / batch))


def paraphrase_split(intents: Sequence[Intent], n_pool: int, n_test: int, test_after: int,
                     seed: int = 0) -> tuple[list[Intent], list[Intent]]:
    """The paraphrase comparison's requests from case 4's stream ``intents``: ``n_test`` held-out ones (programs
    ``test_after`` .. ``test_after + n_test``, held-out frames) and ``n_pool`` training ones (the programs before
    them, then the programs after them; training frames). The programs are distinct, so the two sets are
    disjoint; raising ``n_pool`` keeps the held-out requests and the first training requests as they were."""
    intents = V.sequence("intents", intents, of=lambda k, x: V.instance(k, x, Intent), min_len=2)
    n_pool, n_test = V.integer("n_pool", n_pool, min=1), V.integer("n_test", n_test, min=1)
    test_after = V.integer("test_after", test_after, min=0)
    head = min(n_pool, test_after)
    need = test_after + n_test + (n_pool - head)
    if len(intents) < need:
        raise ValueError(f"intents must hold at least {need} programs for n_pool={n_pool}, n_test={n_test}, "
                         f"test_after={test_after}, got {len(intents)}")
    pool = list(intents[:head]) + list(intents[test_after + n_test:need])
    test = list(intents[test_after:test_after + n_test])
    return paraphrase_intents(pool, "train", seed), paraphrase_intents(test, "test", seed)


def checkpoint_config(name: str = "agents") -> dict:
    """The config of the chapter's checkpoint ``agents``, ``credit`` or ``paraphrase`` (what the default run asks
    for)."""
    V.one_of("name", name, ("agents", "credit", "paraphrase", "paraphrase_seeds", "paraphrase_swap"))
    if name in ("paraphrase_seeds", "paraphrase_swap"):  # round 4 (#63), registered before their runs
        cfg = checkpoint_config("paraphrase")
        # paraphrase_seeds: the seed-level reading of learned_success_gain. The paraphrase checkpoint's agents
        # at n_train 1000 (seeds 0-2) plus seeds 3-9 trained and scored the same way (10 seeds; one seed costs
        # about 2 x 2000 training steps and 900 scored answers), so seed_interval can read DSL - SQL over seeds.
        # Reading, fixed now: learned_success_gain's measured number becomes the lower end of the two-sided 95 %
        # Student-t interval over the seeds (seed_interval) of d_s = DSL (verifier-constrained) minus SQL
        # held-out success at n_train 1000, SQL = the SQL decoder with the higher mean over the seeds; held
        # only if it is above 0 (the interval excludes 0 from below), else not held; the conditions (para_fit_*,
        # para_plateau) are measured at every seed and, the claim being one number, must hold at every seed.
        # The first 3 seeds' per-request reading (the 3-seed contract) is reported beside it.
        # paraphrase_swap: why SQL reached 0.707 at seed 1 (0.557 / 0.417 at seeds 0 / 2). The requests and
        # programs do not depend on the seed; the seed sets the SQL agent's initialisation (global seed at
        # make_agent) and its batch order (train_agent's generator); the two crossed pairs (init, order) of
        # seeds 0 and 1, (0, 1) and (1, 0), separate them (the diagonal pairs are seeds 0 and 1 of the
        # paraphrase checkpoint). Reading, fixed now: a factor explains seed 1's excess (its SQL success minus
        # the mean of seeds 0 and 2) when its main effect over the 2 x 2 table is at least half that excess and
        # the other factor's is below half; otherwise neither alone does.
        # Amended before seeds 10-29 ran: seed 3 measured the cost, 99 s (estimated ~8 min when 10 was fixed),
        # so the count was sized to the compute share: seeds 3-29, 30 in all, read as below (the interval over
        # all 30); the first-registered 10-seed interval (seeds 0-9) is reported beside it. Decided on the cost
        # alone; seed 3's numbers had been printed (and seen) when it was made.
        cfg.update(n_trains=[1000], seeds=list(range(3, 30)))
        if name == "paraphrase_swap":
            cfg.update(seeds=[0, 1], interfaces=["sql"], arms=["sql_free", "sql_grammar"])
        return cfg
    if name == "paraphrase":  # case 4 with power: paraphrased requests, a sample-efficiency curve
        # the programs of case 4's stream (the first max(n_trains) train, the next n_test held out), requests
        # paraphrased (training frames / held-out frames and fillers); every decoder gets `repairs` repairs.
        # Reading rule, fixed before any run: learned_success_gain is read at the smallest n_train at which
        # either agent's best decoder reaches `read_level` mean held-out success (the largest if none does).
        # Extension (written before its training): no size up to 300 reached 0.5 (best mean 0.30 at 300), so
        # larger sizes are added (the stream has > 4000 distinct programs). The held-out requests stay
        # programs 300-599 (`test_after`, paraphrase_split), training requests beyond 300 come after them. Steps
        # per size by one rule for all sizes: max(steps, min_epochs * n / batch) (para_steps).
        # First design, min_epochs 20 with sizes 1000 and 3000: its seed-0 probe missed the unchanged fit bar
        # (0.95) at 1000 (DSL 0.80, SQL 0.85; at 3000, 1875 steps, both fit; probe_paraphrase.json), so it was
        # replaced, before any other seed, by min_epochs 64, the passes over the data that fit at 300
        # (600 * 32 / 300): 600 steps for n <= 300 (sizes 25-300 unchanged), 2000 at 1000. 3000 (6000 steps
        # per agent) did not fit the time budget and was dropped. Reading rule, level and bars unchanged.
        return {"db_seed": 0, "intent_seed": 0, "para_seed": 0, "n_trains": [25, 50, 100, 300, 1000],
                "n_test": 300, "test_after": 300, "seeds": [0, 1, 2], "interfaces": list(AGENT_INTERFACES),
                "d_model": 64, "n_layer": 2, "n_head": 4, "steps": 600, "min_epochs": 64, "batch": 32,
                "lr": 3e-3, "repairs": 3, "n_fit": 60, "arms": list(PARA_ARMS), "read_level": 0.5}
    if name == "credit":  # case 5: a weakly supervised warm start, then RL on unlabelled requests
        # round 3: a credit experiment, not drift (round 2, lr 1e-3 with no anchor, lost held-out success):
        # k samples per request with a leave-one-out baseline, a KL anchor to the warm start, lr 1e-4,
        # held-out greedy success measured every eval_every steps on 300 held-out requests.
        # beta 0.05 -> 0.2 (all arms and seeds, rebuilt): at 0.05 seed 2 drifted (supervised success 0.885 <
        # 0.9, the no_drift bar); a one-seed probe at 0.2 kept both arms >= 0.97 with held-out AUC unchanged
        return {"db_seed": 0, "intent_seed": 0, "n_train": 300, "n_test": 300, "seeds": [0, 1, 2],
                "arms": list(GROUP_ARMS), "d_model": 32, "n_layer": 2, "n_head": 4, "n_sft": 200,
                "sft_steps": 1000, "sft_batch": 32, "sft_lr": 3e-3, "rl_steps": 600, "n_requests": 8, "k": 4,
                "rl_lr": 1e-4, "beta": 0.2, "eval_every": 25}
    return {"db_seed": 0, "intent_seed": 0, "n_train": 300, "n_test": 60, "seeds": [0, 1, 2],
            "interfaces": list(AGENT_INTERFACES), "d_model": 64, "n_layer": 2, "n_head": 4,
            "steps": 1000, "batch": 32, "lr": 3e-3}


# ----------------------------------------------------------------------------------------------------------------
# Case 5: structured credit for a request-conditioned policy (REINFORCE on the learned agent's architecture)
# ----------------------------------------------------------------------------------------------------------------
CREDIT_ARMS = ("sparse", "prefix_reward", "filter", "token_credit")


def token_advantages(programs: Sequence[Sequence[str]], success: Sequence[float], arm: str,
                     ended: Sequence[bool] | None = None, penalty: float = 1.0) -> list[np.ndarray]:
    """Per-token advantages of a sampled batch, one array per program over its sampled tokens (END included
    when it was sampled, ``ended[b]``; default True).

    ``sparse`` and ``filter``: every token gets ``R - mean(R)`` with ``R`` = 1 for a correct result.
    ``prefix_reward``: the same with ``R' = R + 0.5 * valid_prefix_length / (len + 1)`` (one number per program).
    ``token_credit``: a verified program is scored as in ``sparse``; in a rejected program only the token at the
    verifier's first error position gets credit, ``-penalty``; the valid prefix before it and the tokens after
    it get none (the verifier says nothing against the first and nothing about the second).
    """
    progs = [_check_tokens(p, f"programs[{i}]") for i, p in enumerate(V.sequence("programs", programs, min_len=1))]
    R = V.array("success", success, ndim=1, dtype="float").astype(float)
    if len(R) != len(progs):
        raise ValueError(f"success must have one entry per program ({len(progs)}), got {len(R)}")
    V.one_of("arm", arm, CREDIT_ARMS)
    ended = [True] * len(progs) if ended is None else [V.boolean(f"ended[{i}]", e) for i, e in
                                                       enumerate(V.sequence("ended", ended))]
    if len(ended) != len(progs):
        raise ValueError(f"ended must have one entry per program ({len(progs)}), got {len(ended)}")
    penalty = V.positive("penalty", penalty)
    n_tok = [len(p) + int(e) for p, e in zip(progs, ended)]
    if arm == "prefix_reward":
        R = R + 0.5 * np.array([valid_prefix_length(p) / (len(p) + 1) for p in progs])
    adv = R - R.mean()
    out = []
    for p, n, a in zip(progs, n_tok, adv):
        if arm == "token_credit" and not verify(p).ok:
            g = np.zeros(n)
            g[min(valid_prefix_length(p), n - 1)] = -penalty  # the token the verifier names
            out.append(g)
        else:
            out.append(np.full(n, a))
    return out


def _left_pad(intents: Sequence[Intent], index: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Requests + <sep>, left-padded so that every output starts at the same column; ``pos`` restarts at 0 at the
    first real token (as in :func:`encode`), ``valid`` marks the real tokens."""
    reqs = [[index[t] for t in request_tokens(it.request)] + [index[SEP]] for it in intents]
    W = max(map(len, reqs))
    ids = torch.full((len(reqs), W), index[PAD], dtype=torch.long)
    pos = torch.zeros((len(reqs), W), dtype=torch.long)
    valid = torch.zeros((len(reqs), W), dtype=torch.bool)
    for b, r in enumerate(reqs):
        ids[b, W - len(r):] = torch.tensor(r)
        pos[b, W - len(r):] = torch.arange(len(r))
        valid[b, W - len(r):] = True
    return ids, pos, valid


def _attn_mask(valid: torch.Tensor) -> torch.Tensor:
    T = valid.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    return (causal[None] & valid[:, None, :]) | torch.eye(T, dtype=torch.bool)[None]


def reinforce_agent(model: torch.nn.Module, con: sqlite3.Connection, intents: Sequence[Intent], arm: str,
                    steps: int, batch: int = 32, lr: float = 1e-3, seed: int = 0, penalty: float = 1.0,
                    cache: dict | None = None) -> dict[str, np.ndarray]:
    """REINFORCE for a request-conditioned DSL policy (a :func:`make_agent` model, trained in place).

    Each step draws ``batch`` requests from ``intents``, samples one program per request token by token
    (temperature 1; ``arm="filter"`` samples only verifier-valid continuations and normalises over them), scores
    it (correct executed rows = 1) and takes one Adam step on ``-sum_t A_t log p(a_t)`` with the per-token
    advantages of :func:`token_advantages`. Returns per-step ``success`` and ``valid`` rates of the sampled batch.
    """
    V.instance("model", model, torch.nn.Module)
    V.instance("con", con, sqlite3.Connection)
    intents = V.sequence("intents", intents, of=lambda k, x: V.instance(k, x, Intent), min_len=1)
    V.one_of("arm", arm, CREDIT_ARMS)
    steps, batch = V.integer("steps", steps, min=1), V.integer("batch", batch, min=2)
    lr, seed, penalty = V.positive("lr", lr), V.seed("seed", seed), V.positive("penalty", penalty)
    V.optional(V.instance, "cache", cache, dict)
    vocab, index, out_ok = _dsl_policy_parts(model)
    rng = np.random.default_rng([seed, 5])
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    succ, valid_rate = np.zeros(steps), np.zeros(steps)
    for step in range(steps):
        pick = [intents[i] for i in rng.integers(len(intents), size=batch)]
        ids, P, Rl, W, outs, ended, masks = _roll_out(model, pick, vocab, index, out_ok, gen, arm == "filter")
        R = np.zeros(batch)
        for b, (toks, it) in enumerate(zip(outs, pick)):
            ok = verify(toks).ok
            valid_rate[step] += ok / batch
            R[b] = float(ok and results_equal(_cached_execute(con, compile_sql(toks), cache)[1], it.result))
        succ[step] = R.mean()
        adv = token_advantages(outs, R, arm, ended, penalty)
        T_out = ids.shape[1] - W
        A = torch.zeros((batch, T_out))
        for b, a in enumerate(adv):
            A[b, :len(a)] = torch.as_tensor(a, dtype=torch.float32)
        if not A.any():
            continue
        model.train()
        logits = model(ids[:, :-1], mask=_attn_mask(Rl[:, :-1]), pos=P[:, :-1])[:, W - 1:]
        logits = logits.masked_fill(~masks[:, :T_out], -math.inf)
        logp = torch.log_softmax(logits, -1).gather(-1, ids[:, W:, None])[..., 0]
        loss = -(A * torch.where(A != 0, logp, torch.zeros_like(logp))).sum() / batch
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return {"success": succ, "valid": valid_rate}


@torch.no_grad()
def sample_programs(model: torch.nn.Module, intents: Sequence[Intent], seed: int = 0,
                    constrained: bool = False) -> list[list[str]]:
    """One program per intent sampled at temperature 1 from a DSL policy, as :func:`reinforce_agent` samples
    during training (``constrained``: only verifier-valid continuations, as its ``filter`` arm). For measuring
    what a trained policy writes on its own requests; trains nothing."""
    V.instance("model", model, torch.nn.Module)
    intents = V.sequence("intents", intents, of=lambda k, x: V.instance(k, x, Intent), min_len=1)
    seed, constrained = V.seed("seed", seed), V.boolean("constrained", constrained)
    vocab, index, out_ok = _dsl_policy_parts(model)
    gen = torch.Generator().manual_seed(seed)
    return _roll_out(model, list(intents), vocab, index, out_ok, gen, constrained)[4]


def greedy_success(model: torch.nn.Module, con: sqlite3.Connection, intents: Sequence[Intent],
                   interface: str) -> float:
    """Share of ``intents`` a learned agent answers correctly by greedy free decoding, no repair: on training
    intents, how well it fits its training data; on supervised intents after RL, whether the policy drifted."""
    V.instance("con", con, sqlite3.Connection)
    V.sequence("intents", intents, min_len=1)
    return float(np.mean([agent_answer(model, con, it, interface).success for it in intents]))


# ----------------------------------------------------------------------------------------------------------------
# Case 5 (round 3): a credit experiment. Several samples per request with a leave-one-out baseline (RLOO), a KL
# anchor to the warm start, a small learning rate, and held-out greedy success measured along the run.
# ----------------------------------------------------------------------------------------------------------------
GROUP_ARMS = ("sparse", "token_credit")


def group_advantages(programs: Sequence[Sequence[str]], success: Sequence[float], k: int, arm: str,
                     ended: Sequence[bool] | None = None) -> list[np.ndarray]:
    """Per-token advantages with a per-request leave-one-out baseline (RLOO).

    ``programs`` come in consecutive groups of ``k`` samples of the same request. Sample ``i`` of a group gets
    ``A_i = R_i - mean(R_j, j != i)``. ``sparse``: every token of the program (END included when it was sampled,
    ``ended[i]``, default True) gets ``A_i``. ``token_credit`` (blame-conserving): a program the verifier accepts
    is scored as in ``sparse``; in a rejected program the whole blame ``A_i * n_tokens`` (the sum ``sparse``
    spreads over its tokens) goes to the token at the verifier's first error position, the rest get 0. Both arms
    give every program the same total advantage; they differ only in where a rejected program's blame lands.
    """
    progs = [_check_tokens(p, f"programs[{i}]") for i, p in enumerate(V.sequence("programs", programs, min_len=1))]
    R = V.array("success", success, ndim=1, dtype="float").astype(float)
    if len(R) != len(progs):
        raise ValueError(f"success must have one entry per program ({len(progs)}), got {len(R)}")
    k = V.integer("k", k, min=2)
    if len(progs) % k:
        raise ValueError(f"the number of programs ({len(progs)}) must be a multiple of the group size k={k}")
    V.one_of("arm", arm, GROUP_ARMS)
    ended = [True] * len(progs) if ended is None else [V.boolean(f"ended[{i}]", e) for i, e in
                                                       enumerate(V.sequence("ended", ended))]
    if len(ended) != len(progs):
        raise ValueError(f"ended must have one entry per program ({len(progs)}), got {len(ended)}")
    G = R.reshape(-1, k)
    adv = (G - (G.sum(1, keepdims=True) - G) / (k - 1)).ravel()
    out = []
    for p, e, a in zip(progs, ended, adv):
        n = len(p) + int(e)
        if arm == "token_credit" and a != 0 and not verify(p).ok:
            g = np.zeros(n)
            g[min(valid_prefix_length(p), n - 1)] = a * n
            out.append(g)
        else:
            out.append(np.full(n, a))
    return out


def _dsl_policy_parts(model: torch.nn.Module) -> tuple[tuple[str, ...], dict, torch.Tensor]:
    vocab = agent_vocab("dsl")
    if getattr(getattr(model, "cfg", None), "vocab_size", None) != len(vocab):
        raise ValueError("model must be a DSL agent (make_agent('dsl', ...))")
    index = {t: i for i, t in enumerate(vocab)}
    out_ok = torch.zeros(len(vocab), dtype=torch.bool)
    out_ok[index[SEP] + 1:index[END] + 1] = True  # output tokens and END, never a request word, <sep> or <pad>
    return vocab, index, out_ok


@torch.no_grad()
def _roll_out(model, intents, vocab, index, out_ok, gen: torch.Generator | None, constrained: bool = False):
    """Sample (``gen``) or greedy-decode (``gen=None``) one program per intent, batched; ``constrained``: only
    verifier-valid continuations. The one token-append loop of the RL samplers and the batched evaluator. Returns
    the token ids (request + outputs), positions, real-token mask, request width, outputs, whether END was
    produced and the allowed-token masks used at each output step ``(B, steps, V)``."""
    ids, P, real = _left_pad(intents, index)
    W, B = ids.shape[1], len(intents)
    done = np.zeros(B, dtype=bool)
    outs: list[list[str]] = [[] for _ in range(B)]
    ended = [False] * B
    states, masks = [_START] * B, []
    model.eval()
    for _ in range(MAX_PROGRAM_LEN + 1):
        m = torch.stack([_allowed_mask(st) for st in states]) if constrained else out_ok.expand(B, -1)
        masks.append(m)
        logits = model(ids, mask=_attn_mask(real), pos=P)[:, -1].masked_fill(~m, -math.inf)
        nxt = logits.argmax(-1) if gen is None else torch.multinomial(logits.softmax(-1), 1, generator=gen)[:, 0]
        for b in range(B):
            if done[b]:
                continue
            tok = vocab[int(nxt[b])]
            if tok == END:
                done[b] = ended[b] = True
            else:
                outs[b].append(tok)
                if constrained:
                    states[b] = _step(states[b], tok)[0]
        ids = torch.cat([ids, nxt[:, None]], 1)
        P = torch.cat([P, P[:, -1:] + 1], 1)
        real = torch.cat([real, torch.ones((B, 1), dtype=torch.bool)], 1)
        if done.all():
            break
    return ids, P, real, W, outs, ended, torch.stack(masks, 1)


@cache
def _allowed_mask(state: tuple) -> torch.Tensor:
    """The verifier's valid next tokens after ``state`` as a boolean mask over a DSL policy's vocabulary (shared
    and cached: never modify it)."""
    vocab = agent_vocab("dsl")
    index = {t: i for i, t in enumerate(vocab)}
    m = torch.zeros(len(vocab), dtype=torch.bool)
    m[[index[t] for t in _allowed(state)]] = True
    return m


def _score(con, outs, intents, cache) -> tuple[np.ndarray, np.ndarray]:
    ok = np.array([verify(o).ok for o in outs])
    R = np.array([bool(v) and results_equal(_cached_execute(con, compile_sql(o), cache)[1], it.result)
                  for o, v, it in zip(outs, ok, intents)], dtype=float)
    return R, ok


def greedy_outcomes(model: torch.nn.Module, con: sqlite3.Connection, intents: Sequence[Intent],
                    cache: dict | None = None, chunk: int = 256) -> np.ndarray:
    """Per intent, whether a DSL policy's greedy program (free decoding, no repair; batched) returns the requested
    rows: a boolean array. The batched twin of ``agent_answer(model, con, it, "dsl").success``."""
    V.instance("model", model, torch.nn.Module)
    V.instance("con", con, sqlite3.Connection)
    intents = V.sequence("intents", intents, of=lambda k, x: V.instance(k, x, Intent), min_len=1)
    V.optional(V.instance, "cache", cache, dict)
    chunk = V.integer("chunk", chunk, min=1)
    vocab, index, out_ok = _dsl_policy_parts(model)
    res = []
    for i in range(0, len(intents), chunk):
        part = list(intents[i:i + chunk])
        outs = _roll_out(model, part, vocab, index, out_ok, None)[4]
        res.append(_score(con, outs, part, cache)[0] > 0)
    return np.concatenate(res)


def group_reinforce(model: torch.nn.Module, ref: torch.nn.Module, con: sqlite3.Connection,
                    intents: Sequence[Intent], arm: str, steps: int, n_requests: int = 8, k: int = 4,
                    lr: float = 1e-4, beta: float = 0.05, seed: int = 0, eval_sets: dict | None = None,
                    eval_every: int = 25, cache: dict | None = None) -> dict[str, np.ndarray]:
    """RL with a per-request baseline and a KL anchor for a DSL policy (a :func:`make_agent` model, trained in place).

    Each step draws ``n_requests`` requests from ``intents``, samples ``k`` programs for each (temperature 1),
    scores them (correct executed rows = 1) and takes one Adam step on
    ``(-sum_t A_t log p(a_t) + beta * sum_t KL(p(.|prefix) || ref(.|prefix))) / n_samples`` with the advantages of
    :func:`group_advantages` and the exact KL to the frozen policy ``ref`` (the warm start) at every sampled
    output position. Every ``eval_every`` steps (and at steps 0 and ``steps``) each of ``eval_sets`` (name ->
    intents) is greedy-decoded (:func:`greedy_outcomes`). Returns per-step ``success``, ``valid`` and ``kl``
    (mean per sample), ``eval_steps`` and ``eval/<name>``: booleans of shape ``(n_evals, n_intents)``.
    """
    V.instance("model", model, torch.nn.Module)
    V.instance("ref", ref, torch.nn.Module)
    V.instance("con", con, sqlite3.Connection)
    intents = V.sequence("intents", intents, of=lambda n, x: V.instance(n, x, Intent), min_len=1)
    V.one_of("arm", arm, GROUP_ARMS)
    steps, n_requests = V.integer("steps", steps, min=1), V.integer("n_requests", n_requests, min=1)
    k, eval_every = V.integer("k", k, min=2), V.integer("eval_every", eval_every, min=1)
    lr, beta, seed = V.positive("lr", lr), V.nonnegative("beta", beta), V.seed("seed", seed)
    eval_sets = {} if eval_sets is None else dict(V.instance("eval_sets", eval_sets, dict))
    V.optional(V.instance, "cache", cache, dict)
    vocab, index, out_ok = _dsl_policy_parts(model)
    _dsl_policy_parts(ref)
    ref.eval()
    rng = np.random.default_rng([seed, 55])
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    n = n_requests * k
    succ, valid_rate, kl_curve = np.zeros(steps), np.zeros(steps), np.zeros(steps)
    ev_steps: list[int] = []
    ev: dict[str, list[np.ndarray]] = {name: [] for name in eval_sets}

    def evaluate(step: int) -> None:
        ev_steps.append(step)
        for name, its in eval_sets.items():
            ev[name].append(greedy_outcomes(model, con, its, cache))

    evaluate(0)
    for step in range(steps):
        pick = [intents[i] for i in rng.integers(len(intents), size=n_requests) for _ in range(k)]
        ids, P, real, W, outs, ended, _ = _roll_out(model, pick, vocab, index, out_ok, gen)
        R, ok = _score(con, outs, pick, cache)
        succ[step], valid_rate[step] = R.mean(), ok.mean()
        adv = group_advantages(outs, R, k, arm, ended)
        T_out = ids.shape[1] - W
        A = torch.zeros((n, T_out))
        at = torch.zeros((n, T_out), dtype=torch.bool)  # the sampled output positions
        for b, a in enumerate(adv):
            A[b, :len(a)] = torch.as_tensor(a, dtype=torch.float32)
            at[b, :len(a)] = True
        model.train()
        mask = _attn_mask(real[:, :-1])
        lo, hi = index[SEP] + 1, index[END] + 1  # the output tokens and END: the policy's action space
        logp_all = torch.log_softmax(model(ids[:, :-1], mask=mask, pos=P[:, :-1])[:, W - 1:, lo:hi], -1)
        with torch.no_grad():
            ref_lp = torch.log_softmax(ref(ids[:, :-1], mask=mask, pos=P[:, :-1])[:, W - 1:, lo:hi], -1)
        logp = logp_all.gather(-1, (ids[:, W:, None] - lo).clamp(0, hi - lo - 1))[..., 0]
        kl = (logp_all.exp() * (logp_all - ref_lp)).sum(-1)
        kl = (kl * at).sum() / n
        loss = -(A * torch.where(at, logp, torch.zeros_like(logp))).sum() / n + beta * kl
        opt.zero_grad()
        loss.backward()
        opt.step()
        kl_curve[step] = kl.item()
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            evaluate(step + 1)
    model.eval()
    out = {"success": succ, "valid": valid_rate, "kl": kl_curve, "eval_steps": np.array(ev_steps)}
    out.update({f"eval/{name}": np.array(v, dtype=bool) for name, v in ev.items()})
    return out


def curve_auc(steps: Sequence[float], values: Sequence[float]) -> float:
    """Area under a curve measured at ``steps`` (trapezoid rule), divided by the span of ``steps``: the curve's
    mean height over the run (for a success curve, a number in [0, 1] that needs no censoring)."""
    x = V.array("steps", steps, ndim=1, dtype="float").astype(float)
    y = V.array("values", values, ndim=1, dtype="float").astype(float)
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"steps and values must have the same length >= 2, got {len(x)} and {len(y)}")
    if np.any(np.diff(x) <= 0):
        raise ValueError("steps must be strictly increasing")
    return float(np.sum((y[1:] + y[:-1]) / 2 * np.diff(x)) / (x[-1] - x[0]))
