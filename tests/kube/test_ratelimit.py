from webhook.kube.ratelimit import TokenBucket


def test_burst_then_qps() -> None:
    now = [0.0]
    bucket = TokenBucket(qps=50, burst=100, clock=lambda: now[0])
    assert all(bucket.reserve() == 0.0 for _ in range(100))  # the burst is free
    assert bucket.reserve() == 1 / 50  # then one token every 20 ms
    assert bucket.reserve() == 2 / 50
    now[0] += 1.0  # 50 tokens refill in a second; 2 were borrowed
    assert all(bucket.reserve() == 0.0 for _ in range(48))
    assert bucket.reserve() > 0
