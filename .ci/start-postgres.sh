#!/usr/bin/env bash
# Start (or reuse) a PostgreSQL cluster on 127.0.0.1:5432 with role/db tau/tau_test.
set -euo pipefail
ver=$(ls /usr/lib/postgresql | sort -n | tail -1)
if ! pg_lsclusters -h | grep -q "^$ver main"; then
  pg_createcluster "$ver" main >/dev/null
fi
sed -i "s/^#\?listen_addresses.*/listen_addresses = '127.0.0.1'/" "/etc/postgresql/$ver/main/postgresql.conf"
# The tests' xdist workers live in network namespaces of their own (tests/workers.py):
# they reach the server over its Unix socket, as role tau with its password.
hba="/etc/postgresql/$ver/main/pg_hba.conf"
grep -q "^local all tau scram-sha-256" "$hba" || sed -i "0,/^local/s//local all tau scram-sha-256\n&/" "$hba"
pg_ctlcluster "$ver" main start 2>/dev/null || pg_ctlcluster "$ver" main reload 2>/dev/null || true
for _ in $(seq 1 30); do
  pg_isready -h 127.0.0.1 -p 5432 -q && break
  sleep 1
done
su postgres -c "psql -q -tc \"SELECT 1 FROM pg_roles WHERE rolname='tau'\" | grep -q 1 || psql -q -c \"CREATE ROLE tau LOGIN PASSWORD 'tau' CREATEDB\""
su postgres -c "psql -q -tc \"SELECT 1 FROM pg_database WHERE datname='tau_test'\" | grep -q 1 || psql -q -c \"CREATE DATABASE tau_test OWNER tau\""
echo "postgres $ver ready on 127.0.0.1:5432"
