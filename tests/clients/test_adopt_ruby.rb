# Adopted sequences with ActiveRecord 6.1 (issue 57): in a database where
# snowflake_adopt_sequences() is on, a migration's plain create_table
# (a bigserial key) hands out Snowflake IDs of this server (worker 21) to
# create, insert_all and a nextval() of the table's sequence. Run by
# run.sh with SNOWFLAKE_HOST, SNOWFLAKE_PORT and SNOWFLAKE_ADOPT_DB set.
require "active_record"

def check(ok, what)
  return if ok
  warn "ruby adopt: FAILED: #{what}"
  exit 1
end

ActiveRecord::Base.establish_connection(adapter: "postgresql", host: ENV.fetch("SNOWFLAKE_HOST"),
                                        port: ENV.fetch("SNOWFLAKE_PORT"), database: ENV.fetch("SNOWFLAKE_ADOPT_DB"),
                                        username: "postgres", pool: 1)
ActiveRecord::Migration.verbose = false

class CreateWidgets < ActiveRecord::Migration[6.1]
  def change
    create_table :widgets do |t|
      t.text :name, null: false
      t.timestamps
    end
  end
end
CreateWidgets.migrate(:up)

class Widget < ActiveRecord::Base; end

ids = 100.times.map { |i| Widget.create!(name: "w#{i}").id }
now = Time.now
ids += Widget.insert_all(200.times.map { |i| { name: "b#{i}", created_at: now, updated_at: now } },
                         returning: %w[id]).rows.flatten.map(&:to_i)
seq = Widget.connection.select_value("SELECT pg_get_serial_sequence('widgets', 'id')")
check(seq == "public.widgets_id_seq", "the key keeps its sequence (#{seq})")
ids << Widget.connection.select_value("SELECT nextval('#{seq}')").to_i
workers = Widget.connection.select_values(
  "SELECT DISTINCT snowflake_worker_id(i) FROM unnest('{#{ids.join(',')}}'::bigint[]) i"
).map(&:to_i)
check(workers == [21], "every key decodes to worker 21 (#{workers})")
check(ids.uniq.size == ids.size, "keys are unique")
check(Widget.find(ids[150]).name == "b50", "find by a Snowflake key")
puts "ruby adopt: ActiveRecord create_table and #{ids.size} keys ok"
