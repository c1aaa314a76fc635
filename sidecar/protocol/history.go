package protocol

// HistoryKept is how many of a task's n history messages (the most recent ones) an answer in
// version v carries when the request's historyLength is historyLength (nil: not given). A2A
// 1.0 (a2a.proto, GetTaskRequest and SendMessageConfiguration history_length): "An unset
// value means the client does not impose any limit. A value of zero is a request to not
// include any messages." A2A 0.3 defines no meaning for 0, and its gRPC history_length is a
// plain int32, where 0 is the unset value; a2a-python's 0.3 server reads 0 as no limit: so in
// 0.3, 0 imposes none. A negative value (refused by every reader) is read as 0.
func HistoryKept(v Version, historyLength *int, n int) int {
	if historyLength == nil || (*historyLength == 0 && v == V03) {
		return n
	}
	return min(n, max(*historyLength, 0))
}
