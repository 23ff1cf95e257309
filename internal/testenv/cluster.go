package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// RedisCluster is a real Redis Cluster (masters, and replicas when started
// by StartRedisClusterReplicas), each node a Redis from StartRedis with
// cluster-enabled yes.
type RedisCluster struct {
	t     testing.TB
	nodes []*Redis

	mu        sync.Mutex
	client    *redis.ClusterClient
	failovers int // FailOver calls, to take the shards in turn
}

// clusterOKTimeout bounds the wait for cluster_state:ok. A master refuses
// to turn ok during its first 2s (CLUSTER_WRITABLE_DELAY in cluster.c), so
// every start or node restart costs at least that.
const clusterOKTimeout = 20 * time.Second

// StartRedisCluster starts masters (at least 3) cluster-enabled redis-server
// nodes on free ports p whose bus ports p+10000 are also free, each in its
// own t.TempDir() with its own nodes.conf, joins them with
// `redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes`, and
// waits until every node reports cluster_state:ok. extraConfig directives go
// into every node's redis.conf (cluster-node-timeout is 15000 without
// replicas, 1000 with them, unless overridden). All nodes stop in t.Cleanup.
func StartRedisCluster(t testing.TB, masters int, extraConfig ...string) *RedisCluster {
	t.Helper()
	return StartRedisClusterReplicas(t, masters, 0, extraConfig...)
}

// StartRedisClusterReplicas is StartRedisCluster with replicas replicas per
// master (masters × (1 + replicas) nodes), so that a master that fails is
// replaced by its replica (cluster-node-timeout 1000 ms: a failover takes
// a few seconds). Which nodes are masters is Redis's choice: ask ROLE.
func StartRedisClusterReplicas(t testing.TB, masters, replicas int, extraConfig ...string) *RedisCluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("testenv: redis cluster needs at least 3 masters, got %d", masters)
	}
	if replicas == 0 {
		// No replica, no failover to hasten: a short node timeout would
		// only take a busy machine's stall for a failed master and answer
		// CLUSTERDOWN (seen at load 18). Redis's own default; extraConfig
		// comes later and wins.
		extraConfig = append([]string{"cluster-node-timeout 15000"}, extraConfig...)
	}
	cli := Program(t, "redis-cli")
	c := &RedisCluster{t: t}
	for range masters * (1 + replicas) {
		c.nodes = append(c.nodes, StartRedis(t, RedisOptions{Config: extraConfig, clusterNode: true}))
	}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.client != nil {
			c.client.Close()
		}
	})

	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("testenv: redis-cli %s: %v\n%s\n%s", strings.Join(args, " "), err, out, c.logs())
	}
	if err := c.WaitOK(clusterOKTimeout); err != nil {
		t.Fatalf("testenv: redis cluster: %v\n%s", err, c.logs())
	}
	return c
}

// logs returns every node's log, for failure messages.
func (c *RedisCluster) logs() string {
	var b strings.Builder
	for i, n := range c.nodes {
		fmt.Fprintf(&b, "--- node %d %s log ---\n%s\n", i, n.Addr(), readTail(n.logPath(), 3000))
	}
	return b.String()
}

// Addrs returns the nodes' "127.0.0.1:PORT" addresses in node order.
func (c *RedisCluster) Addrs() []string {
	a := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		a[i] = n.Addr()
	}
	return a
}

// Nodes returns the nodes; use them to Kill, Stop, Restart or Pause one.
func (c *RedisCluster) Nodes() []*Redis { return append([]*Redis(nil), c.nodes...) }

// Node returns node i.
func (c *RedisCluster) Node(i int) *Redis { return c.nodes[i] }

// ClusterOptions returns new go-redis cluster options for all nodes.
func (c *RedisCluster) ClusterOptions() *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:                    c.Addrs(),
		DialTimeout:              2 * time.Second,
		ReadTimeout:              5 * time.Second,
		ContextTimeoutEnabled:    true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

// Client returns a go-redis cluster client shared by the test and closed in
// t.Cleanup.
func (c *RedisCluster) Client() *redis.ClusterClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == nil {
		c.client = redis.NewClusterClient(c.ClusterOptions())
	}
	return c.client
}

// WaitOK waits until every node is running and reports cluster_state:ok,
// e.g. after Node(i).Restart(). Allow at least 3s after a node (re)starts.
func (c *RedisCluster) WaitOK(timeout time.Duration) error { return c.waitOK(timeout, false) }

// WaitLiveOK waits until every running node reports cluster_state:ok (a
// killed master's replica has taken over).
func (c *RedisCluster) WaitLiveOK(timeout time.Duration) error { return c.waitOK(timeout, true) }

// waitOK waits until every node, or with live every running one, reports
// cluster_state:ok.
func (c *RedisCluster) waitOK(timeout time.Duration, live bool) error {
	deadline := time.Now().Add(timeout)
	for {
		bad := ""
		for i, n := range c.nodes {
			if s := clusterState(n); (!live || n.Running()) && s != "ok" {
				bad = fmt.Sprintf("node %d (%s): cluster_state %s", i, n.Addr(), s)
				break
			}
		}
		if bad == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not ok after %v: %s", timeout, bad)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FailOver kills (SIGKILL) the master of one shard that has a replica,
// waits until the replica has taken over, restarts the killed node, which
// rejoins as the new master's replica, and waits until the cluster is ok.
// Successive calls take the shards in turn, so that after as many calls as
// shards every one has failed over once; it returns the killed node.
func (c *RedisCluster) FailOver(ctx context.Context) (*Redis, error) {
	type shard struct{ master, replica *Redis }
	var shards []shard
	for _, n := range c.nodes {
		role, err := n.Do(ctx, "ROLE")
		if err != nil {
			return nil, fmt.Errorf("ROLE %s: %w", n.Addr(), err)
		}
		r, _ := role.([]any)
		if len(r) < 3 || r[0] != "slave" {
			continue
		}
		for _, m := range c.nodes {
			if fmt.Sprint(r[2]) == strconv.Itoa(m.Port()) {
				shards = append(shards, shard{m, n})
			}
		}
	}
	if len(shards) == 0 {
		return nil, fmt.Errorf("no master with a replica in the cluster")
	}
	// The shard's lower port names it whichever node is its master now.
	slices.SortFunc(shards, func(a, b shard) int {
		return min(a.master.Port(), a.replica.Port()) - min(b.master.Port(), b.replica.Port())
	})
	c.mu.Lock()
	sh := shards[c.failovers%len(shards)]
	c.failovers++
	c.mu.Unlock()
	// A replica that has not synced yet would not be promoted.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		role, _ := sh.replica.Do(ctx, "ROLE")
		if r, ok := role.([]any); ok && len(r) > 3 && r[3] == "connected" {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("replica %s not in sync with its master within 60 s", sh.replica.Addr())
		}
	}
	sh.master.Kill()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		role, _ := sh.replica.Do(ctx, "ROLE")
		if r, ok := role.([]any); ok && len(r) > 0 && r[0] == "master" {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("replica %s not promoted within 60 s of its master's kill", sh.replica.Addr())
		}
	}
	if err := c.WaitLiveOK(60 * time.Second); err != nil {
		return nil, err
	}
	if err := sh.master.start(); err != nil {
		return nil, fmt.Errorf("restart %s: %w", sh.master.Addr(), err)
	}
	return sh.master, c.WaitOK(60 * time.Second)
}

// clusterState returns the node's cluster_state, or a description of why it
// could not be read.
func clusterState(n *Redis) string {
	if !n.Running() {
		return "(node not running)"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := n.Client().ClusterInfo(ctx).Result()
	if err != nil {
		return fmt.Sprintf("(CLUSTER INFO: %v)", err)
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "cluster_state:"); ok {
			return v
		}
	}
	return "(no cluster_state in CLUSTER INFO)"
}
