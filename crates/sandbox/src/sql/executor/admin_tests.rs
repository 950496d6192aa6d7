//! Security statements: a least-privilege reader built with logins,
//! users and GRANTs.

use crate::sql::test_support::{error_numbers, errors, int, login, ok, rows, run, shop, text};

#[test]
fn least_privilege_reader() {
    let (e, mut s) = shop();
    ok(
        &mut s,
        "USE master
         CREATE LOGIN reader WITH PASSWORD = 'R3ader!'
         CREATE LOGIN stranger WITH PASSWORD = 'S3cret!'
         GRANT VIEW SERVER STATE TO reader
         USE shop
         CREATE USER reader FOR LOGIN reader
         CREATE ROLE cdc_readers
         ALTER ROLE cdc_readers ADD MEMBER reader
         GRANT SELECT ON OBJECT::dbo.customers TO cdc_readers
         GRANT VIEW DATABASE STATE TO reader",
    );
    assert_eq!(
        login(&e, "reader", "wrong", None).err().map(|e| e.number),
        Some(18456)
    );
    assert_eq!(
        login(&e, "nobody", "x", None).err().map(|e| e.number),
        Some(18456)
    );
    assert_eq!(
        login(&e, "stranger", "S3cret!", Some("shop"))
            .err()
            .map(|e| e.number),
        Some(4060)
    );
    assert!(login(&e, "stranger", "S3cret!", None).is_ok());
    let mut r = match login(&e, "reader", "R3ader!", Some("shop")) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(r.database(), "shop");
    assert_eq!(
        rows(&mut r, "SELECT COUNT(*) FROM customers"),
        vec![vec![int(3)]]
    );
    let out = run(&mut r, "SELECT * FROM orders");
    let errs = errors(&out);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].number, 229);
    assert_eq!(
        errs[0].message,
        "The SELECT permission was denied on the object 'orders', database 'shop', schema 'dbo'."
    );
    assert_eq!(
        error_numbers(&run(&mut r, "DELETE FROM customers")),
        vec![229]
    );
    assert_eq!(
        error_numbers(&run(&mut r, "CREATE TABLE x (a int)")),
        vec![262]
    );
    // Metadata visibility: only the granted table is listed.
    assert_eq!(
        rows(&mut r, "SELECT name FROM sys.tables"),
        vec![vec![text("customers")]]
    );
    ok(&mut s, "ALTER ROLE db_datareader ADD MEMBER reader");
    assert_eq!(
        rows(&mut r, "SELECT COUNT(*) FROM orders"),
        vec![vec![int(4)]]
    );
}
