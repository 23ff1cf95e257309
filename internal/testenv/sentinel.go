package testenv

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartRedisReplica starts a redis-server replicating master and waits
// until the replication link is up.
func StartRedisReplica(t testing.TB, master *Redis) *Redis {
	t.Helper()
	r := StartRedis(t, RedisOptions{Config: []string{"replicaof 127.0.0.1 " + strconv.Itoa(master.Port())}})
	deadline := time.Now().Add(15 * time.Second)
	for {
		info, err := r.Client().Info(context.Background(), "replication").Result()
		if err == nil && containsLine(info, "master_link_status:up") {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: replica on port %d: link to master %s not up: %v\n%s", r.Port(), master.Addr(), err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StartRedisSentinel starts a Redis Sentinel (redis-server --sentinel) on
// its own port that monitors master under name, with quorum 1. Tests fail
// over by asking (SENTINEL FAILOVER), so the master is judged down only
// after 60 s without an answer: with 1 s, a busy machine or a long script
// (the conformance suite's 100,000-recipient call) made Sentinel fail over
// by itself mid-test ("WAIT cannot be used with replica instances").
func StartRedisSentinel(t testing.TB, name string, master *Redis) *Redis {
	t.Helper()
	return StartRedis(t, RedisOptions{
		sentinel: true,
		Config: []string{
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1", name, master.Port()),
			"sentinel down-after-milliseconds " + name + " 60000",
			"sentinel failover-timeout " + name + " 5000",
		},
	})
}

// SentinelMaster returns the address a Sentinel gives for the master name.
func SentinelMaster(ctx context.Context, sentinel *Redis, name string) (string, error) {
	v, err := sentinel.Do(ctx, "SENTINEL", "get-master-addr-by-name", name)
	if err != nil {
		return "", fmt.Errorf("sentinel get-master-addr-by-name %s: %w", name, err)
	}
	hp, ok := v.([]any)
	if !ok || len(hp) != 2 {
		return "", fmt.Errorf("sentinel get-master-addr-by-name %s: reply %v", name, v)
	}
	return net.JoinHostPort(fmt.Sprint(hp[0]), fmt.Sprint(hp[1])), nil
}

func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSuffix(l, "\r") == line {
			return true
		}
	}
	return false
}
