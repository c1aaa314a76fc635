package capgate.deny.schema

deny contains {"capability": "*", "reason": "x"} if input.caller.nickname == "x"
