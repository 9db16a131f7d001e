// Go: pgx v4 and database/sql with lib/pq. Keys are int64, read back with
// INSERT ... RETURNING id; bulk loads take their keys in one round trip
// from snowflake_nextval(n). encoding/json writes int64 as a number that
// JavaScript rounds: tag the field `json:"id,string"`.
package main

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v4"
)

const epochMs = 1704067200000 // snowflake_id.epoch, 2024-01-01 00:00:00+00

type Order struct {
	ID   int64  `json:"id,string"`
	Item string `json:"item"`
}

func insertOrder(ctx context.Context, conn *pgx.Conn, item string) (int64, error) {
	var id int64
	err := conn.QueryRow(ctx, "INSERT INTO go_orders (item) VALUES ($1) RETURNING id", item).Scan(&id)
	return id, err
}

// A batch: one round trip, one key per insert.
func insertBatch(ctx context.Context, conn *pgx.Conn, items []string) ([]int64, error) {
	b := &pgx.Batch{}
	for _, item := range items {
		b.Queue("INSERT INTO go_orders (item) VALUES ($1) RETURNING id", item)
	}
	res := conn.SendBatch(ctx, b)
	defer res.Close()
	ids := make([]int64, len(items))
	for i := range items {
		if err := res.QueryRow().Scan(&ids[i]); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// COPY with keys taken up front.
func copyOrders(ctx context.Context, conn *pgx.Conn, items []string) ([]int64, error) {
	rows, err := conn.Query(ctx, "SELECT snowflake_nextval($1::bigint)", int64(len(items)))
	if err != nil {
		return nil, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	src := make([][]interface{}, len(items))
	for i, item := range items {
		src[i] = []interface{}{ids[i], item}
	}
	_, err = conn.CopyFrom(ctx, pgx.Identifier{"go_orders"}, []string{"id", "item"}, pgx.CopyFromRows(src))
	return ids, err
}

// database/sql (lib/pq) works the same way.
func insertOrderSQL(db *sql.DB, item string) (int64, error) {
	var id int64
	err := db.QueryRow("INSERT INTO go_orders (item) VALUES ($1) RETURNING id", item).Scan(&id)
	return id, err
}

// decode returns the Unix ms, worker id and sequence of an ID.
func decode(id int64) (int64, int64, int64) {
	return epochMs + id>>22, (id >> 12) & 1023, id & 4095
}
