-- A third CDC-enabled table of the demo's shop, for
-- examples/kubernetes/shop-source.yaml (one worker for three tables). Run
-- it after shop-cdc.sql: the reader cdc_reader already reads dbo and cdc.

USE shop;
GO

CREATE TABLE dbo.payments (
    id        bigint         NOT NULL PRIMARY KEY,
    order_id  bigint         NOT NULL,
    amount    decimal(12,2)  NOT NULL,
    paid_at   datetime2(3)   NOT NULL DEFAULT SYSUTCDATETIME()
);
GO

EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'payments',
     @role_name = NULL, @supports_net_changes = 1;
GO
