-- On the merged server, once per source (psql -v source=NAME -v conninfo=...):
-- copy what the source has, then stream what it writes from then on.
-- The source publishes the tables: CREATE PUBLICATION merge FOR TABLE customers, orders;
CREATE SUBSCRIPTION merge_:source
    CONNECTION :'conninfo'
    PUBLICATION merge
    WITH (copy_data = true);
