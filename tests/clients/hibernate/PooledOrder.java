// JPA / Hibernate with adopted sequences (docs/clients.md): the SEQUENCE
// strategy, allocationSize 50. The database's switch
// (snowflake_adopt_sequences()) adopts the sequence hbm2ddl or a Flyway
// script creates with INCREMENT BY 50; each nextval() then returns a
// Snowflake ID with the 50 keys below and above it reserved for the
// caller, so the pooled optimizer's 50 keys per call are Snowflake IDs,
// and JDBC batching stays on (IDENTITY would turn it off).
import javax.persistence.Entity;
import javax.persistence.GeneratedValue;
import javax.persistence.GenerationType;
import javax.persistence.Id;
import javax.persistence.SequenceGenerator;
import javax.persistence.Table;

@Entity
@Table(name = "hib_pooled")
public class PooledOrder {
    @Id
    @GeneratedValue(strategy = GenerationType.SEQUENCE, generator = "pooled_gen")
    @SequenceGenerator(name = "pooled_gen", sequenceName = "hib_pooled_seq", allocationSize = 50)
    public Long id;

    public String item;
}
