package capgate.deny.conflict

x := 1

x := 2 if true

deny contains {"capability": "*", "reason": sprintf("%v", [x])}
