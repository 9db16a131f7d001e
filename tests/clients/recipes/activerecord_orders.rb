# Rails / ActiveRecord 6.1 with the pg gem: the key is a bigint the
# database fills (DEFAULT snowflake_nextval()); ActiveRecord reads it back
# with RETURNING, for create and for insert_all(returning:). as_json writes
# it as a number, which JavaScript rounds: send it as a string.
require "active_record"

SNOWFLAKE_EPOCH_MS = 1_704_067_200_000 # snowflake_id.epoch, 2024-01-01 00:00:00+00

class RubyOrder < ActiveRecord::Base
  # In a migration: create_table :ruby_orders, id: :bigint,
  #   default: -> { "snowflake_nextval()" }
  def as_json(options = nil)
    super.merge("id" => id.to_s)
  end

  def self.decode(id)
    { ms: SNOWFLAKE_EPOCH_MS + (id >> 22), worker_id: (id >> 12) & 1023, sequence: id & 4095 }
  end
end
