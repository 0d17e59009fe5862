-- Where each run executed (tab or edge: run::executor), for its audit record and the metrics.
ALTER TABLE runs ADD COLUMN executor TEXT;
