package protocol

// specMethods is every JSON-RPC method the MCP specification defines, in any
// revision from 2024-11-05 to 2026-07-28, the tasks utility (2025-11-25) and
// its 2026-07-28 extension included.
var specMethods = map[string]struct{}{
	// Lifecycle and utilities.
	MethodInitialize: {}, MethodInitialized: {}, MethodDiscover: {}, MethodPing: {},
	MethodCancelled: {}, MethodProgress: {}, "logging/setLevel": {}, MethodLogMessage: {},
	"completion/complete": {},
	// Server features.
	MethodToolsList: {}, MethodToolsCall: {}, "notifications/tools/list_changed": {},
	"prompts/list": {}, MethodPromptsGet: {}, "notifications/prompts/list_changed": {},
	"resources/list": {}, "resources/templates/list": {}, MethodResourcesRead: {},
	"resources/subscribe": {}, "resources/unsubscribe": {},
	"notifications/resources/updated": {}, "notifications/resources/list_changed": {},
	MethodSubscriptionsListen: {}, MethodSubscriptionsAck: {},
	// Client features.
	MethodSampling: {}, MethodElicitation: {}, MethodElicitationComplete: {},
	MethodRootsList: {}, "notifications/roots/list_changed": {},
	// Tasks.
	"tasks/get": {}, "tasks/result": {}, "tasks/list": {}, "tasks/cancel": {}, "tasks/update": {},
	"notifications/tasks/status": {}, "notifications/tasks": {},
}

// IsSpecMethod reports whether method is one the MCP specification defines
// (in any revision). Metrics use it to keep a hostile peer's invented method
// names out of their labels.
func IsSpecMethod(method string) bool {
	_, ok := specMethods[method]
	return ok
}

// SpecMethods returns the methods [IsSpecMethod] accepts, in no order.
func SpecMethods() []string {
	out := make([]string, 0, len(specMethods))
	for m := range specMethods {
		out = append(out, m)
	}
	return out
}
