//! Reading IDs: decoding them (ours and foreign layouts), their text and
//! JSON forms, and public IDs. Nothing here mints or keeps state; it
//! works without `shared_preload_libraries`.
//!
//! Uses only the ground (errors, settings, the data directory for the
//! public keys file); everything above may use it
//! (`scripts/module_graph.py`).
//! - [`decode`]: decoding, composing and range bounds for this server's
//!   layout;
//! - [`decode_foreign`]: foreign layouts, explicit-layout bounds;
//! - [`text`]: JavaScript-safe text forms (decimal, base32);
//! - [`js_safe`]: JavaScript-safe JSON of whole rows and documents (SQL in
//!   `sql/`);
//! - [`public_ids`]: encrypted public IDs (`snowflake_to_public()`).

pub mod decode;
pub mod decode_foreign;
pub mod js_safe;
pub mod public_ids;
pub mod text;
