//! The fence's error says where the draw came from. A `nextval()` that no
//! plan makes (a `CHECK` constraint, a subscriber's apply, the `COPY`
//! and `ADD COLUMN` cases docs/adopting-paths.md lists) reaches an adopted
//! sequence's own counter, which stops at the fence (`adopt_record`):
//! PostgreSQL's 2200H, "nextval: reached maximum value of sequence", with
//! no HINT. Where this backend knows of adopted sequences in its
//! database, the error gets a HINT that names those paths (issue 63: "a
//! clear SQLSTATE and a HINT that names the path"). The hook reads only
//! this backend's own memory: no catalog, no lock, in the error path.

use pgrx::pg_sys;

static mut PREV_EMIT: pg_sys::emit_log_hook_type = None;

/// Install the hook: in the postmaster, at preload.
pub(super) fn init() {
    // SAFETY: installed once, in _PG_init of the postmaster, before any
    // backend exists.
    unsafe {
        PREV_EMIT = pg_sys::emit_log_hook;
        pg_sys::emit_log_hook = Some(emit);
    }
}

/// PostgreSQL's sequence.c, untranslated (`message_id`).
const REACHED: &[u8] = b"nextval: reached ";

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn emit(edata: *mut pg_sys::ErrorData) {
    // SAFETY: PostgreSQL's ErrorData, in its error context; the strings
    // are allocated there (`CurrentMemoryContext` is the error's own).
    unsafe {
        if let Some(prev) = PREV_EMIT {
            prev(edata);
        }
        let e = &mut *edata;
        if e.elevel < pgrx::PgLogLevel::ERROR as i32
            || e.sqlerrcode
                != pgrx::PgSqlErrorCode::ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED as i32
            || !e.hint.is_null()
            || e.message_id.is_null()
            || !std::ffi::CStr::from_ptr(e.message_id)
                .to_bytes()
                .starts_with(REACHED)
            || !super::list::any_known()
        {
            return;
        }
        // `… of sequence "NAME" (N)`, in the server's encoding: the name's
        // bytes as they are (a name may hold quotes, or bytes that are no
        // UTF-8), between the first quote and the last `" (`.
        let mut hint: Vec<u8> = b"If sequence".to_vec();
        if !e.message.is_null() {
            let m = std::ffi::CStr::from_ptr(e.message).to_bytes();
            let first = m.iter().position(|&b| b == b'"');
            let last = m.windows(3).rposition(|w| w == b"\" (");
            if let (Some(a), Some(b)) = (first, last) {
                if b > a {
                    hint.extend_from_slice(b" ");
                    hint.extend_from_slice(&m[a..=b]);
                }
            }
        }
        hint.extend_from_slice(
            b" is adopted by snowflake_id, this nextval() was evaluated where no plan is made \
              (a CHECK constraint, a subscriber's apply, a COPY or ALTER TABLE case that docs/adopting-paths.md lists), \
              which draws the sequence's own values only up to its fence. Call nextval() inside the statement instead; \
              see docs/adopting.md.",
        );
        if let Ok(c) = std::ffi::CString::new(hint) {
            e.hint = pg_sys::pstrdup(c.as_ptr());
        }
    }
}
