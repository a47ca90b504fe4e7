-- Version 6: client certificates (mutual TLS) the hub has seen on a cluster's streams, by the
-- SHA-256 of their DER encoding. Deleting the cluster, or rotating its token with
-- --revoke-certificates, revokes them: a certificate bound to a cluster that is gone (or was
-- re-keyed) is refused, even if the cluster id is registered again and the certificate's CA
-- still signs it. No foreign key: the record must outlive the cluster it names.
CREATE TABLE client_certificates (
    fingerprint   TEXT PRIMARY KEY,
    cluster_id    TEXT NOT NULL,
    first_seen    REAL NOT NULL,
    revoked_time  REAL
) STRICT;

CREATE INDEX client_certificates_cluster ON client_certificates (cluster_id);
