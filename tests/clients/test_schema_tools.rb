# Issue 63: schema tools see no drift (Rails; test_schema_tools.js says
# how). ActiveRecord 6.1's migration (create_table, a bigserial key) runs
# against a stock database and one with the switch on, as the database
# owner `app`; the schema dump (db/schema.rb's content) must be the same
# on both, but for its `enable_extension "snowflake_id"` (which a restore
# from it needs), and unchanged by a second run, and create() then gets a
# Snowflake key of worker 21 on the switch's database. Run by run.sh with
# SNOWFLAKE_HOST and SNOWFLAKE_PORT set.
require "active_record"
require "stringio"

def check(ok, what)
  return if ok
  warn "schema tools: rails: FAILED: #{what}"
  exit 1
end

class CreateParts < ActiveRecord::Migration[6.1]
  def change
    create_table :parts do |t|
      t.text :name
    end
  end
end

class Part < ActiveRecord::Base; end

def run(db)
  ActiveRecord::Base.establish_connection(adapter: "postgresql", host: ENV.fetch("SNOWFLAKE_HOST"),
                                          port: ENV.fetch("SNOWFLAKE_PORT"), database: db,
                                          username: "app", pool: 1)
  ActiveRecord::Migration.verbose = false
  dumps = 2.times.map do
    CreateParts.migrate(:up) unless ActiveRecord::Base.connection.table_exists?(:parts)
    io = StringIO.new
    ActiveRecord::SchemaDumper.dump(ActiveRecord::Base.connection, io)
    io.string.lines.reject { |l| l.strip.start_with?("#") || l.strip.empty? }
  end
  Part.reset_column_information
  id = Part.create!(name: "x").id
  ActiveRecord::Base.remove_connection
  [dumps, id]
end

stock, stock_id = run("st_rails_stock")
dumps, id = run("st_rails_switch")
ours = dumps.map { |d| d.reject { |l| l.strip == 'enable_extension "snowflake_id"' } }
check(ours.length == 2 && dumps[0].length == ours[0].length + 1, "the schema dump does not enable the extension")
check(ours == stock, "the schema dump differs on the switch's database:\n#{dumps[0].join}\nstock:\n#{stock[0].join}")
check(dumps[0] == dumps[1], "a second run changed the schema dump")
check(((id >> 12) & 1023) == 21 && id > (1 << 40), "the key on the switch's database is not a Snowflake ID of worker 21: #{id}")
check(stock_id < 1000, "the stock database's key: #{stock_id}")
puts "schema tools: rails: the same schema dump on both (#{dumps[0].length} lines), unchanged by a second run; key #{id}"
