package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// startRedis starts a real redis-server (internal/testenv) with extra
// redis.conf directives.
func startRedis(t testing.TB, config ...string) *testenv.Redis {
	t.Helper()
	return testenv.StartRedis(t, testenv.RedisOptions{Config: config})
}

// cli runs one command and renders the reply the way redis-cli prints it
// (arrays one element per line), for short assertions.
func cli(t testing.TB, r *testenv.Redis, args ...any) string {
	t.Helper()
	v, err := r.Do(context.Background(), args...)
	if err != nil {
		t.Fatalf("redis %v: %v", args, err)
	}
	return render(v)
}

func render(v any) string {
	switch x := v.(type) {
	case []any:
		var parts []string
		for _, e := range x {
			parts = append(parts, render(e))
		}
		return strings.Join(parts, "\n")
	case map[any]any:
		var parts []string
		for k, e := range x {
			parts = append(parts, render(k)+"\n"+render(e))
		}
		return strings.Join(parts, "\n")
	}
	return fmt.Sprint(v)
}
