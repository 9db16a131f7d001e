//! PostgreSQL's utility processor, for the extension's `ProcessUtility`
//! hooks (`crate::adopt`, `crate::high_water`): each keeps the hook it
//! replaced and calls it, or this one.

use pgrx::pg_sys;

unsafe extern "C-unwind" {
    /// PostgreSQL's utility processor, called unguarded (see
    /// `crate::adopt::walk::raw`): an ERROR in it unwinds as PostgreSQL's
    /// own, through no Rust frame that holds anything.
    #[allow(clippy::too_many_arguments)]
    pub fn standard_ProcessUtility(
        pstmt: *mut pg_sys::PlannedStmt,
        query_string: *const std::ffi::c_char,
        read_only_tree: bool,
        context: pg_sys::ProcessUtilityContext::Type,
        params: pg_sys::ParamListInfo,
        query_env: *mut pg_sys::QueryEnvironment,
        dest: *mut pg_sys::DestReceiver,
        qc: *mut pg_sys::QueryCompletion,
    );
}
