-- A site's ledger keeps the one transcript of each federated_power round it confirmed
-- (kind 'confirm'; docs/design/federation.md, "The consistency round").
ALTER TABLE site_messages DROP CONSTRAINT site_messages_kind_check;
ALTER TABLE site_messages ADD CONSTRAINT site_messages_kind_check
    CHECK (kind IN ('shares', 'inbox', 'contribution', 'unmask', 'confirm'));
