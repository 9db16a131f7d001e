// Go clients against a running server (worker_id 21): pgx v4 (QueryRow
// with RETURNING, a batch, CopyFrom with keys from snowflake_nextval(n))
// and database/sql with lib/pq; int64 keys, unique, increasing per
// connection, decoded in Go as on the server; the JSON pitfall and the
// `,string` tag. Run by run.sh with SNOWFLAKE_DSN set.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"

	"github.com/jackc/pgx/v4"
	_ "github.com/lib/pq"
)

func check(ok bool, format string, args ...interface{}) {
	if !ok {
		fmt.Fprintf(os.Stderr, "go: FAILED: "+format+"\n", args...)
		os.Exit(1)
	}
}

func increasing(ids []int64) bool {
	for i := 1; i < len(ids); i++ {
		if ids[i-1] >= ids[i] {
			return false
		}
	}
	return true
}

func main() {
	ctx := context.Background()
	dsn := os.Getenv("SNOWFLAKE_DSN")
	conn, err := pgx.Connect(ctx, dsn)
	check(err == nil, "connect: %v", err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE TABLE go_orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text NOT NULL)")
	check(err == nil, "create: %v", err)

	var ids []int64
	for i := 0; i < 100; i++ {
		id, err := insertOrder(ctx, conn, fmt.Sprintf("single %d", i))
		check(err == nil, "insert: %v", err)
		ids = append(ids, id)
	}
	items := make([]string, 200)
	for i := range items {
		items[i] = fmt.Sprintf("batch %d", i)
	}
	batch, err := insertBatch(ctx, conn, items)
	check(err == nil && len(batch) == 200, "batch: %v (%d keys)", err, len(batch))
	ids = append(ids, batch...)
	copied, err := copyOrders(ctx, conn, items)
	check(err == nil && len(copied) == 200, "CopyFrom: %v (%d keys)", err, len(copied))
	ids = append(ids, copied...)
	check(increasing(ids), "pgx: IDs do not increase on one connection")

	// Decoded in Go as on the server.
	rows, err := conn.Query(ctx, `SELECT id, (extract(epoch FROM d.ts) * 1000)::bigint, d.worker_id, d.sequence
	                                FROM unnest($1::bigint[]) id, snowflake_decode(id) d`, ids)
	check(err == nil, "decode query: %v", err)
	n := 0
	for rows.Next() {
		var id, ms int64
		var worker, seq int32
		check(rows.Scan(&id, &ms, &worker, &seq) == nil, "scan")
		gms, gw, gs := decode(id)
		check(gms == ms && gw == int64(worker) && gs == int64(seq), "decode of %d: %d %d %d, server %d %d %d", id, gms, gw, gs, ms, worker, seq)
		check(gw == 21, "worker id %d, not 21", gw)
		n++
	}
	check(rows.Err() == nil && n == len(ids), "decoded %d of %d", n, len(ids))

	// database/sql with lib/pq.
	db, err := sql.Open("postgres", dsn+" sslmode=disable")
	check(err == nil, "sql.Open: %v", err)
	defer db.Close()
	db.SetMaxOpenConns(1)
	var pqIDs []int64
	for i := 0; i < 100; i++ {
		id, err := insertOrderSQL(db, fmt.Sprintf("pq %d", i))
		check(err == nil, "lib/pq insert: %v", err)
		pqIDs = append(pqIDs, id)
	}
	check(increasing(pqIDs), "lib/pq: IDs do not increase on one connection")
	seen := map[int64]bool{}
	for _, id := range append(ids, pqIDs...) {
		check(!seen[id], "duplicate ID %d", id)
		seen[id] = true
	}

	// JSON: a plain int64 field is a number JavaScript rounds; `,string` keeps it.
	type plain struct {
		ID int64 `json:"id"`
	}
	// The first ID a double cannot hold (1 in 64 of them it can: multiples of its spacing).
	id := int64(0)
	for _, v := range ids {
		if int64(float64(v)) != v {
			id = v
			break
		}
	}
	check(id != 0, "a double holds every ID exactly")
	raw, _ := json.Marshal(plain{id})
	var js map[string]float64 // what JSON.parse sees: a double
	check(json.Unmarshal(raw, &js) == nil && int64(js["id"]) != id, "a double holds %d exactly", id)
	tagged, _ := json.Marshal(Order{ID: id, Item: "x"})
	check(string(tagged) == fmt.Sprintf(`{"id":"%d","item":"x"}`, id), "json ,string: %s", tagged)
	fmt.Printf("  pgx v4: %d IDs (QueryRow RETURNING, a batch, CopyFrom with keys from snowflake_nextval(n)); "+
		"lib/pq: %d; int64, unique, increasing, decoded in Go as on the server; as a JSON number %d reads %d, "+
		"with `json:\"id,string\"` exact\n", len(ids), len(pqIDs), id, int64(js["id"]))
}
