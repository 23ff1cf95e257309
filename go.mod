module github.com/bulkmilter/bulkmilter

go 1.26.0

require (
	github.com/clipperhouse/uax29/v2 v2.7.0
	github.com/emersion/go-message v0.18.2
	golang.org/x/net v0.62.0
	golang.org/x/text v0.43.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/d--j/go-milter v0.10.2 // indirect
	github.com/dchest/siphash v1.2.3 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
