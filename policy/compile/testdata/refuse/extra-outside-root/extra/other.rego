package capgate_other.deny

x := 1
