package capgate.deny.internal

deny contains {"capability": "*", "reason": "anonymous"} if not data.capgate.authz._authenticated
