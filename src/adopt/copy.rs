//! `COPY … FROM` evaluates the defaults of the columns it leaves out
//! without planning a statement, so [`super::planner`] never sees their
//! `nextval()`. Adoption does not rewrite those defaults in the catalog
//! (issue 63: schema tools read them, and a `bigserial` column must still
//! say `nextval('…_seq'::regclass)`): instead, for the duration of the
//! `COPY`, this backend's relation cache entry of the target table holds
//! each default that calls `nextval()` with [`super::walk::swap`]'s
//! replacement (`seq_nextval`, which hands out a Snowflake ID for an
//! adopted sequence and calls the built-in for any other). `COPY` builds
//! its defaults from that entry once, before the first row; the entry is
//! put back as it was when the `COPY` ends, or at the (sub)transaction's
//! abort if it fails. Nothing else sees it: other backends read the
//! catalog, and the catalog is untouched.
//!
//! The swap lives only while `COPY` builds its defaults: they call
//! `seq_copy_nextval` and `seq_copy_identity`, which nothing else calls,
//! so the look-up of the last of them (`fmgr_info`, through the planner's
//! `needs_fmgr_hook`) says `COPY` has built them all, before any trigger
//! or row, and the entry is put back there ([`looked_up`]). A statement
//! planned or run while the swap lives (an `IMMUTABLE` function's in the
//! `WHERE` clause, folded before `COPY` builds its defaults) is refused,
//! and the backend's cached plans dropped: no code but `COPY`'s own ever
//! sees the swapped entry, so none can copy it into the catalog (`LIKE`,
//! `INHERITS`) or plan with it (the red-team reviews of issue 63). Put
//! back before `COPY` built its defaults (an invalidation of the entry),
//! the defaults are the built-ins: their draws meet the fence (2200H),
//! which stops every draw, never a raw value.
//!
//! A rebuild of the entry while the swap lives (an invalidation) makes a
//! new one from the catalog; the swapped one is then PostgreSQL's to free,
//! and is left alone.

use super::errors;
use super::list;
use super::walk::{count_calls, identity_draw, mentions, swap};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::RefCell;

/// One swap in a relation cache entry.
struct Swapped {
    rel: pg_sys::Relation,
    desc: pg_sys::TupleDesc,
    what: What,
    /// The transaction nesting level of the `COPY`.
    level: i32,
    /// The first of its relation's swaps: that one closes the relation,
    /// as the resource owner that opened it (a swap may be put back in a
    /// subtransaction of the `COPY`, a trigger's).
    first: bool,
    owner: pg_sys::ResourceOwner,
}

enum What {
    /// Default `index`'s expression, `old` before, `new` now.
    Default {
        index: usize,
        old: *mut std::ffi::c_char,
        new: *mut std::ffi::c_char,
    },
    /// Identity column `att` (0-based) of an adopted sequence: no longer
    /// an identity, and a default (`seq_identity(seq)`) added in a new
    /// array of defaults (`new`, one longer than `old`); or a column of a
    /// domain whose default draws, given that default, swapped, as its
    /// own.
    Identity {
        att: usize,
        identity: std::ffi::c_char,
        hasdef: bool,
        old: *mut pg_sys::AttrDefault,
        new: *mut pg_sys::AttrDefault,
    },
    /// A table without constraints or defaults: its entry given an empty
    /// `TupleConstr` (`new`) to hold a domain's default.
    Constr { new: *mut pg_sys::TupleConstr },
}

thread_local! {
    static SWAPPED: RefCell<Vec<Swapped>> = const { RefCell::new(Vec::new()) };
    /// Whether [`SWAPPED`] holds a swap: the one test the hooks make.
    static LIVE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The functions of the swapped defaults (`seq_copy_nextval`,
    /// `seq_copy_identity`, and the replacements of `currval`, `setval`
    /// and `lastval`), and how many calls of them `COPY` has still to look
    /// up before all its defaults are built.
    static PENDING: std::cell::Cell<([pg_sys::Oid; WATCHED], usize)> =
        const { std::cell::Cell::new(([pg_sys::Oid::INVALID; WATCHED], 0)) };
}

/// The planner's `needs_fmgr_hook` asks this of every function looked up
/// (`fmgr_info`): while a swap lives, each look-up of a swapped default's
/// function is `COPY` building that default (`ExecInitExpr`), as nothing
/// else calls those functions; with the last one, `COPY` has built them
/// all, before any trigger or row, and the entry is put back at once.
pub(super) fn looked_up(f: pg_sys::Oid) {
    if !LIVE.with(|l| l.get()) {
        return;
    }
    let (watched, left) = PENDING.with(|p| p.get());
    if f == pg_sys::Oid::INVALID || !watched.contains(&f) {
        return;
    }
    if left > 1 {
        PENDING.with(|p| p.set((watched, left - 1)));
        return;
    }
    PENDING.with(|p| p.set(([pg_sys::Oid::INVALID; WATCHED], 0)));
    // SAFETY: a guarded function of this module.
    unsafe { put_back_all() };
}

/// Before a statement is planned or run: a swap that still lives means
/// `COPY` has not built its defaults yet (a function of its `WHERE`
/// clause, folded first, runs SQL): the swap is put back, the backend's
/// cached plans dropped (the statement was parsed and rewritten from the
/// swapped entry before it reached the planner), and the statement
/// refused (0A000), so that no code but `COPY`'s sees the swapped entry
/// (the second red-team review, F1) and no default of the built-in
/// reaches the sequence.
pub(super) fn statement_starts() {
    if LIVE.with(|l| l.get()) {
        // SAFETY: a guarded function of this module.
        unsafe { refuse() };
    }
}

/// [`statement_starts`]' refusal. The swap stays: a refusal caught by
/// the statement's caller (a PL/pgSQL `EXCEPTION` block in a function
/// that `COPY` folds) must not leave `COPY` to build the catalog's
/// defaults (the red-team review of d5831fa, F2); an abort of the
/// `COPY`'s (sub)transaction puts it back.
#[pg_guard]
unsafe extern "C-unwind" fn refuse() {
    let Some(rel) = SWAPPED.with(|s| s.borrow().first().map(|w| w.rel)) else {
        return;
    };
    // SAFETY: drops every cached plan of this backend (the statement was
    // parsed and rewritten from the swapped entry); the relation is open
    // (COPY's own reference).
    let name = unsafe {
        pg_sys::ResetPlanCache();
        std::ffi::CStr::from_ptr((*(*rel).rd_rel).relname.data.as_ptr())
            .to_string_lossy()
            .into_owned()
    };
    errors::copy_statement_before_defaults(&name);
}

#[pg_guard]
unsafe extern "C-unwind" fn put_back_all() {
    put_back(0, true);
}

/// Have an abort put back the entries a failed `COPY` swapped: at
/// preload.
pub(super) fn init() {
    super::aborts::on_abort(|level| put_back(level, false));
}

/// How many functions [`looked_up`] watches: `seq_copy_nextval` and
/// `seq_copy_identity`, which nothing but `COPY`'s swapped defaults
/// calls (the replacements of `currval` and `lastval` are any planned
/// statement's too: watched, a cached plan's call made the swap go too
/// early, the red-team review of d5831fa, F1).
const WATCHED: usize = 2;

/// Before a `COPY … FROM` into `relid` that leaves a column to its
/// default, in a database with adopted sequences: swap each default that
/// may touch one (a call of the four, as a function or through an
/// operator, or of a function whose default arguments call them: the
/// red-team review of a7ef3ce, F1), and give each adopted identity column
/// and each column of a domain whose default does so a default of its
/// own. Each is the expression COPY will build, planned already, so that
/// the calls counted are the calls COPY looks up (F2: a call that
/// constant folding removes kept the swap alive). Returns how many were
/// swapped ([`put_back`] them after the `COPY`).
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn swap_defaults(
    relid: pg_sys::Oid,
    given: *const Vec<std::ffi::CString>,
) -> usize {
    let Some(adopting) = list::active() else {
        return 0;
    };
    if adopting.copy_nextval == pg_sys::Oid::INVALID
        || adopting.copy_identity == pg_sys::Oid::INVALID
    {
        return 0;
    }
    // The defaults call the functions only COPY's defaults call.
    let mut f = adopting;
    f.nextval = adopting.copy_nextval;
    let watched: [pg_sys::Oid; WATCHED] = [adopting.copy_nextval, adopting.copy_identity];
    // SAFETY: the relation is locked by the caller (COPY's own lock) and
    // stays open (a reference) until it is put back; its entry's defaults
    // are C strings in the cache's memory, replaced by strings allocated
    // there too.
    unsafe {
        let rel = pg_sys::relation_open(relid, pg_sys::NoLock as pg_sys::LOCKMODE);
        // Only the columns COPY leaves to their defaults: a swapped default
        // is then drawn from in the first row, before any trigger runs.
        let given = &*given;
        let left = |attnum: usize| {
            let att = attribute((*rel).rd_att, attnum - 1);
            let name = std::ffi::CStr::from_ptr((*att).attname.data.as_ptr());
            !given.iter().any(|g| g.as_c_str() == name)
        };
        // Every replacement is made first: the look-ups below (an
        // identity's sequence in pg_depend, a domain's default, a
        // function's default arguments) read catalogs, which may rebuild
        // the entry; nothing after them reads one, so the swaps go into
        // the entry COPY will read. The columns' own defaults, by number.
        let mut own: Vec<(i16, *mut pg_sys::Node)> = vec![];
        let constr = (*(*rel).rd_att).constr;
        if !constr.is_null() {
            for k in 0..(*constr).num_defval as usize {
                let d = (*constr).defval.add(k);
                if !(*d).adbin.is_null() && left((*d).adnum as usize) {
                    own.push(((*d).adnum, pg_sys::stringToNode((*d).adbin).cast()));
                }
            }
        }
        own.retain(|&(_, e)| mentions(e, std::ptr::null_mut()));
        // Defaults added to columns without one: an adopted identity's
        // draw (COPY draws an identity's value where no extension can
        // step in, so in this entry the column is no identity for now,
        // and defaults to `seq_identity(seq)`), and a domain's default
        // (COPY builds a column's default from its type's only where the
        // column has none).
        let mut added: Vec<(usize, *mut pg_sys::Node)> = vec![];
        for i in 0..(*(*rel).rd_att).natts as usize {
            let att = attribute((*rel).rd_att, i);
            if (*att).attisdropped || (*att).attgenerated != 0 || !left(i + 1) {
                continue;
            }
            if (*att).attidentity != 0 {
                if f.identity == pg_sys::Oid::INVALID || (*att).atttypid != pg_sys::INT8OID {
                    continue;
                }
                let e = pg_sys::build_column_default(rel, (i + 1) as _);
                if !e.is_null() && (*e).type_ == pg_sys::NodeTag::T_NextValueExpr {
                    let seq = (*(e as *mut pg_sys::NextValueExpr)).seqid;
                    if list::is_adopted_known(seq) {
                        added.push((i, identity_draw(adopting.copy_identity, seq)));
                    }
                }
                continue;
            }
            if (*att).atthasdef
                || pg_sys::get_typtype((*att).atttypid) as u8 != pg_sys::TYPTYPE_DOMAIN
            {
                continue;
            }
            let e = pg_sys::get_typdefault((*att).atttypid);
            if !e.is_null() && mentions(e, std::ptr::null_mut()) {
                swap(e, (&raw mut f).cast());
                added.push((i, pg_sys::expression_planner(e.cast()).cast()));
            }
        }
        for (_, e) in own.iter_mut() {
            swap(*e, (&raw mut f).cast());
            *e = pg_sys::expression_planner((*e).cast()).cast();
        }
        // A default that calls setval(): PostgreSQL's would move an adopted
        // sequence's counter back wherever the swap is lost before COPY
        // builds it (an invalidation of the entry), and no hook stops it
        // there: refused, before anything is swapped (F2).
        for e in own
            .iter()
            .map(|(_, e)| *e)
            .chain(added.iter().map(|(_, e)| *e))
        {
            // The replacements, and PostgreSQL's own: a function inlined
            // by the planning after the swap (F2 of 6dda376's review).
            for set in [
                f.setval,
                f.setval3,
                pg_sys::Oid::from(pg_sys::F_SETVAL_REGCLASS_INT8),
                pg_sys::Oid::from(pg_sys::F_SETVAL_REGCLASS_INT8_BOOL),
            ] {
                let mut calls: (pg_sys::Oid, usize) = (set, 0);
                count_calls(e, (&raw mut calls).cast());
                if calls.1 > 0 {
                    errors::copy_default_setval(&crate::convert::as_owner::relation_name(relid));
                }
            }
        }
        let desc = (*rel).rd_att;
        let mut n = 0;
        let mut installed: Vec<*mut pg_sys::Node> = vec![];
        let level = pg_sys::GetCurrentTransactionNestLevel();
        // A table without constraints or defaults has no room for a
        // domain's default: it gets an empty one for the COPY (F1: a
        // domain's setval() there moved the counter back).
        if (*desc).constr.is_null() && !added.is_empty() {
            let old_cxt = pg_sys::MemoryContextSwitchTo(pg_sys::CacheMemoryContext);
            let new = pg_sys::palloc0(std::mem::size_of::<pg_sys::TupleConstr>())
                as *mut pg_sys::TupleConstr;
            pg_sys::MemoryContextSwitchTo(old_cxt);
            SWAPPED.with(|s| {
                s.borrow_mut().push(Swapped {
                    rel,
                    desc,
                    what: What::Constr { new },
                    level,
                    first: true,
                    owner: pg_sys::CurrentResourceOwner,
                })
            });
            (*desc).constr = new;
            n += 1;
        }
        let constr = (*desc).constr;
        if !constr.is_null() {
            for k in 0..(*constr).num_defval as usize {
                let d = (*constr).defval.add(k);
                let Some(&(_, expr)) = own.iter().find(|(adnum, _)| *adnum == (*d).adnum) else {
                    continue;
                };
                let old_cxt = pg_sys::MemoryContextSwitchTo(pg_sys::CacheMemoryContext);
                let new = pg_sys::nodeToString(expr.cast());
                pg_sys::MemoryContextSwitchTo(old_cxt);
                SWAPPED.with(|s| {
                    s.borrow_mut().push(Swapped {
                        rel,
                        desc,
                        what: What::Default {
                            index: k,
                            old: (*d).adbin,
                            new,
                        },
                        level,
                        first: n == 0,
                        owner: pg_sys::CurrentResourceOwner,
                    })
                });
                (*d).adbin = new;
                installed.push(expr);
                n += 1;
            }
            for (i, expr) in added {
                let att = attribute(desc, i);
                let old_cxt = pg_sys::MemoryContextSwitchTo(pg_sys::CacheMemoryContext);
                let adbin = pg_sys::nodeToString(expr.cast());
                let count = (*constr).num_defval as usize;
                let size = std::mem::size_of::<pg_sys::AttrDefault>() * (count + 1);
                let new = pg_sys::palloc(size) as *mut pg_sys::AttrDefault;
                pg_sys::MemoryContextSwitchTo(old_cxt);
                if count > 0 {
                    std::ptr::copy_nonoverlapping((*constr).defval, new, count);
                }
                *new.add(count) = pg_sys::AttrDefault {
                    adnum: (i + 1) as _,
                    adbin,
                };
                SWAPPED.with(|s| {
                    s.borrow_mut().push(Swapped {
                        rel,
                        desc,
                        what: What::Identity {
                            att: i,
                            identity: (*att).attidentity,
                            hasdef: (*att).atthasdef,
                            old: (*constr).defval,
                            new,
                        },
                        level,
                        first: n == 0,
                        owner: pg_sys::CurrentResourceOwner,
                    })
                });
                (*constr).defval = new;
                (*constr).num_defval += 1;
                (*att).attidentity = 0;
                (*att).atthasdef = true;
                installed.push(expr);
                n += 1;
            }
        }
        if n == 0 {
            pg_sys::relation_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        } else {
            LIVE.with(|l| l.set(true));
            let mut looks = 0;
            for w in watched.iter().filter(|w| **w != pg_sys::Oid::INVALID) {
                let mut calls: (pg_sys::Oid, usize) = (*w, 0);
                for e in &installed {
                    count_calls(*e, (&raw mut calls).cast());
                }
                looks += calls.1;
            }
            PENDING.with(|p| p.set((watched, looks)));
            if looks == 0 {
                put_back_all();
            }
        }
        n
    }
}

/// After the `COPY` (`n`: how many swaps it made): put back what is still
/// live (a `COPY` of no rows). Only one `COPY`'s swaps live at a time: a
/// statement run inside a `COPY` finds them put back, or is refused.
pub(super) fn put_back_copy(n: usize) {
    if n > 0 && LIVE.with(|l| l.get()) {
        PENDING.with(|p| p.set(([pg_sys::Oid::INVALID; WATCHED], 0)));
        // SAFETY: a guarded function of this module.
        unsafe { put_back_all() };
    }
}

/// At an abort: put back every swap made at `level` or deeper (0: all).
/// The resource owners close the relations.
fn put_back(level: i32, close: bool) {
    let gone: Vec<Swapped> = SWAPPED.with(|s| {
        let mut s = s.borrow_mut();
        let keep = s.iter().take_while(|w| w.level < level).count();
        s.drain(keep..).collect()
    });
    LIVE.with(|l| l.set(SWAPPED.with(|s| !s.borrow().is_empty())));
    restore(gone, close);
}

fn restore(swaps: Vec<Swapped>, close: bool) {
    for w in swaps.into_iter().rev() {
        // SAFETY: the relation is still open (our reference, or the
        // resource owner's until after this callback); a rebuilt entry
        // has another descriptor, and ours is PostgreSQL's to free.
        unsafe {
            if (*w.rel).rd_att == w.desc && !(*w.desc).constr.is_null() {
                let constr = (*w.desc).constr;
                match w.what {
                    What::Constr { new } => {
                        if constr == new {
                            (*w.desc).constr = std::ptr::null_mut();
                            pg_sys::pfree(new.cast());
                        }
                    }
                    What::Default { index, old, new } => {
                        let d = (*constr).defval.add(index);
                        if (*d).adbin == new {
                            (*d).adbin = old;
                            pg_sys::pfree(new.cast());
                        }
                    }
                    What::Identity {
                        att,
                        identity,
                        hasdef,
                        old,
                        new,
                    } => {
                        if (*constr).defval == new {
                            let count = (*constr).num_defval as usize - 1;
                            (*constr).defval = old;
                            (*constr).num_defval = count as _;
                            let a = attribute(w.desc, att);
                            (*a).attidentity = identity;
                            (*a).atthasdef = hasdef;
                            pg_sys::pfree((*new.add(count)).adbin.cast());
                            pg_sys::pfree(new.cast());
                        }
                    }
                }
            }
            if close && w.first {
                let current = pg_sys::CurrentResourceOwner;
                pg_sys::CurrentResourceOwner = w.owner;
                pg_sys::relation_close(w.rel, pg_sys::NoLock as pg_sys::LOCKMODE);
                pg_sys::CurrentResourceOwner = current;
            }
        }
    }
}

/// Attribute `i` (0-based) of a tuple descriptor, to change in place.
///
/// # Safety
/// `desc` is valid and has more than `i` attributes.
unsafe fn attribute(desc: pg_sys::TupleDesc, i: usize) -> *mut pg_sys::FormData_pg_attribute {
    // SAFETY: the layout of `TupleDescData` of each major: the attributes
    // follow the fixed part (PostgreSQL 18: after the compact ones).
    unsafe {
        #[cfg(feature = "pg18")]
        {
            let compact = (*desc).compact_attrs.as_mut_ptr();
            (compact.add((*desc).natts as usize) as *mut pg_sys::FormData_pg_attribute).add(i)
        }
        #[cfg(not(feature = "pg18"))]
        {
            (*desc).attrs.as_mut_ptr().add(i)
        }
    }
}
