package capgate.deny.bad

deny contains x if {
