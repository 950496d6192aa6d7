-- The demo's shop: two CDC-enabled tables, as `mssql-cdc sandbox --demo`
-- creates them before its generator starts changing rows. It also runs on
-- a real SQL Server (with SQL Server Agent) to reproduce the demo there.
-- CDC is enabled with the documented procedures:
-- https://learn.microsoft.com/en-us/sql/relational-databases/track-changes/enable-and-disable-change-data-capture-sql-server

CREATE DATABASE shop;
GO
USE shop;
GO

CREATE TABLE dbo.customers (
    id          int            NOT NULL PRIMARY KEY,
    name        nvarchar(100)  NOT NULL,
    email       varchar(200)   NULL,
    updated_at  datetime2(3)   NOT NULL DEFAULT SYSUTCDATETIME()
);

CREATE TABLE dbo.orders (
    id           bigint         NOT NULL PRIMARY KEY,
    customer_id  int            NOT NULL,
    total        decimal(12,2)  NOT NULL,
    status       varchar(20)    NOT NULL DEFAULT 'new',
    updated_at   datetime2(3)   NOT NULL DEFAULT SYSUTCDATETIME()
);
GO

INSERT INTO dbo.customers (id, name, email) VALUES
    (1, N'Ada Lovelace', 'ada@example.com'),
    (2, N'Grace Hopper', 'grace@example.com'),
    (3, N'Linus Torvalds', NULL);
GO

EXEC sys.sp_cdc_enable_db;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'customers',
     @role_name = NULL, @supports_net_changes = 1;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders',
     @role_name = NULL, @supports_net_changes = 1;
GO

-- A least-privilege reader, as a CDC stream would use: SELECT on the
-- source tables (which the change functions require) and on the cdc schema.
CREATE LOGIN cdc_reader WITH PASSWORD = 'Reader-Pa55word!';
CREATE USER cdc_reader FOR LOGIN cdc_reader;
GRANT SELECT ON SCHEMA::dbo TO cdc_reader;
GRANT SELECT ON SCHEMA::cdc TO cdc_reader;
GRANT VIEW DATABASE STATE TO cdc_reader;
GO

-- Its own session's waits, for the facts' network_wait_ms: from SQL Server
-- 2022, sys.dm_exec_session_wait_stats needs a server permission (granted
-- in master); up to 2019 every login sees its own session.
USE master;
GO
IF CAST(SERVERPROPERTY('ProductMajorVersion') AS int) >= 16
    EXEC (N'GRANT VIEW SERVER PERFORMANCE STATE TO cdc_reader');
GO
