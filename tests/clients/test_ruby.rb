# ActiveRecord 6.1 (pg gem) against a running server (worker_id 21):
# create, insert_all with returning:, find, a bulk load from
# snowflake_nextval(count); IDs unique, increasing per connection and
# decoded in Ruby as on the server; as_json's number and the recipe's
# string. Run by run.sh with SNOWFLAKE_HOST, SNOWFLAKE_PORT and
# SNOWFLAKE_DB set.
require "json"
require_relative "recipes/activerecord_orders"

def check(ok, what)
  return if ok
  warn "ruby: FAILED: #{what}"
  exit 1
end

ActiveRecord::Base.establish_connection(adapter: "postgresql", host: ENV.fetch("SNOWFLAKE_HOST"),
                                        port: ENV.fetch("SNOWFLAKE_PORT"), database: ENV.fetch("SNOWFLAKE_DB"),
                                        username: "postgres", pool: 1)
ActiveRecord::Schema.verbose = false
ActiveRecord::Schema.define do
  create_table :ruby_orders, id: :bigint, default: -> { "snowflake_nextval()" } do |t|
    t.text :item, null: false
  end
end
RubyOrder.reset_column_information

ids = 100.times.map { |i| RubyOrder.create!(item: "single #{i}").id }
check(ids.all? { |id| id.is_a?(Integer) }, "create returns Integer ids")
rows = 200.times.map { |i| { item: "batch #{i}" } }
batch = RubyOrder.insert_all(rows, returning: %w[id]).rows.flatten.map(&:to_i)
check(batch.size == 200, "insert_all returned #{batch.size} ids")
ids += batch
keys = RubyOrder.connection.select_values("SELECT snowflake_nextval(1000)").map(&:to_i)
RubyOrder.insert_all(keys.each_with_index.map { |k, i| { id: k, item: "bulk #{i}" } })
ids += keys
check(ids.uniq.size == ids.size, "IDs are unique")
check(ids.each_cons(2).all? { |a, b| a < b }, "IDs increase on this connection")
check(RubyOrder.find(ids[150]).item == "batch 50", "find by a snowflake id")

server = RubyOrder.connection.select_rows(<<~SQL)
  SELECT id, (extract(epoch FROM d.ts) * 1000)::bigint, d.worker_id, d.sequence
    FROM unnest('{#{ids.join(',')}}'::bigint[]) id, snowflake_decode(id) d
SQL
check(server.size == ids.size, "decoded #{server.size} of #{ids.size}")
server.each do |id, ms, worker, seq|
  mine = RubyOrder.decode(id.to_i)
  check(mine == { ms: ms.to_i, worker_id: worker.to_i, sequence: seq.to_i }, "decode of #{id}")
  check(mine[:worker_id] == 21, "worker id 21")
end

# The first ID a double cannot hold (1 in 64 of them it can: multiples of its spacing).
inexact = ids.find { |v| v.to_f.to_i != v }
check(!inexact.nil?, "a double holds every ID exactly")
order = RubyOrder.find(inexact)
plain = ActiveRecord::Base.instance_method(:as_json).bind(order).call
as_double = JSON.parse(JSON.generate(plain))["id"].to_f.to_i
check(plain["id"].is_a?(Integer) && as_double != order.id, "as_json's number survives a double")
check(JSON.parse(order.to_json)["id"] == order.id.to_s, "the recipe's as_json writes the id as a string")
puts "  ActiveRecord #{ActiveRecord::VERSION::STRING}: #{ids.size} IDs (create, insert_all returning:, a bulk load of " \
     "#{keys.size}), unique, increasing, found by id, decoded in Ruby as on the server; as_json's number " \
     "#{order.id} reads #{as_double} as a double, the recipe sends it as a string"
