//! The sizes of the syntax tree's most numerous nodes. A 1,000,000-promise
//! policy holds millions of each, and the LR parser moves them by value on
//! its stack, so a new inline field that grows one of them should be a
//! decision, not an accident (issue 22, item 4: boxing the rare large
//! variants took an attribute from 136 bytes to 112, a statement from 200
//! to 136, an expression from 80 to 56; a function call's arguments as a
//! boxed slice took an expression to 48, an attribute to 104 and a
//! statement to 128).

#![cfg(target_pointer_width = "64")]

use converge_grammar::ast::{AttrStmt, Expr, Ident, Item, Stmt};
use std::mem::size_of;

#[test]
fn the_numerous_nodes_stay_small() {
    assert_eq!(size_of::<Ident>(), 40);
    assert!(
        size_of::<Expr>() <= 48,
        "Expr is {} bytes",
        size_of::<Expr>()
    );
    assert!(
        size_of::<AttrStmt>() <= 104,
        "AttrStmt is {} bytes",
        size_of::<AttrStmt>()
    );
    assert!(
        size_of::<Stmt>() <= 128,
        "Stmt is {} bytes",
        size_of::<Stmt>()
    );
    assert!(
        size_of::<Item>() <= 192,
        "Item is {} bytes",
        size_of::<Item>()
    );
}
