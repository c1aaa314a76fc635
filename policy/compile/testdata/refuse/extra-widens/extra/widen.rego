package capgate.authz

visible contains "audit-ledger"
