-- A small shop database for trying the sandbox by hand:
--   cargo run -- sandbox --script examples/sandbox/shop.sql
-- Batches are separated by GO, as in sqlcmd.

CREATE DATABASE shop;
GO
USE shop;
GO

CREATE TABLE dbo.customers (
    id          int IDENTITY(1,1) NOT NULL PRIMARY KEY,
    name        nvarchar(100)     NOT NULL,
    email       varchar(200)      NULL,
    created_at  datetime2(3)      NOT NULL DEFAULT SYSUTCDATETIME()
);

CREATE TABLE dbo.orders (
    id           bigint IDENTITY(1,1) NOT NULL PRIMARY KEY,
    customer_id  int               NOT NULL,
    total        decimal(12,2)     NOT NULL,
    status       varchar(20)       NOT NULL DEFAULT 'new',
    ordered_at   datetime2(7)      NOT NULL DEFAULT SYSUTCDATETIME(),
    external_ref uniqueidentifier  NULL
);
GO

INSERT INTO dbo.customers (name, email) VALUES
    (N'Ada Lovelace', 'ada@example.com'),
    (N'Grace Hopper', 'grace@example.com'),
    (N'Linus Torvalds', NULL);

INSERT INTO dbo.orders (customer_id, total, status, external_ref) VALUES
    (1, 19.99, 'paid', NEWID()),
    (1, 5.00, 'new', NULL),
    (2, 120.50, 'shipped', NEWID());
GO

-- A least-privilege reader, as a CDC stream would use.
CREATE LOGIN cdc_reader WITH PASSWORD = 'Reader-Pa55word!';
CREATE USER cdc_reader FOR LOGIN cdc_reader;
GRANT SELECT ON SCHEMA::dbo TO cdc_reader;
GO
