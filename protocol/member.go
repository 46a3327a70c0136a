package protocol

// ValidMember is [Member] for an object already known to be valid JSON,
// such as the Params of a [Message] from [Decode]: it skips validating obj
// again, which for a small request costs more than the scan itself. On
// input that is not valid JSON the result is unspecified (but never a
// panic).
func ValidMember(obj []byte, key string) (value []byte, ok bool) {
	_ = members(obj, func(k, v []byte) bool {
		if string(k) == key {
			value, ok = v, true
		}
		return true // the last of duplicate keys wins, as in encoding/json
	})
	return value, ok
}
