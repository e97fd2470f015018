-- A SecAgg+ site's ledger keeps the roster it revealed its share of the graph seed for (kind
-- 'reveal'; docs/design/federation.md, "Live SecAgg+").
ALTER TABLE site_messages DROP CONSTRAINT site_messages_kind_check;
ALTER TABLE site_messages ADD CONSTRAINT site_messages_kind_check
    CHECK (kind IN ('shares', 'inbox', 'contribution', 'unmask', 'confirm', 'reveal'));
