-- name: ReportInterrupts :many
-- Interrupt figures of a tenant over [from, to), grouped by agent, tool or
-- day. Times are seconds; a percentile over no rows reads 0 (the matching
-- count is 0 then, and the service reports it as absent).
SELECT
    (CASE @group_by::text
        WHEN 'agent' THEN agent
        WHEN 'tool' THEN tool
        ELSE to_char(date_trunc('day', created_at), 'YYYY-MM-DD')
     END)::text AS group_key,
    count(*) AS total,
    count(*) FILTER (WHERE status = 'pending') AS pending,
    count(*) FILTER (WHERE status = 'resolved') AS resolved,
    count(*) FILTER (WHERE status = 'expired') AS expired,
    count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
    count(*) FILTER (WHERE approved) AS approved,
    count(*) FILTER (WHERE approved = false) AS denied,
    coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY decision_seconds), 0)::float8 AS decision_p50,
    coalesce(percentile_cont(0.9) WITHIN GROUP (ORDER BY decision_seconds), 0)::float8 AS decision_p90,
    coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY decision_seconds), 0)::float8 AS decision_p99,
    coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY pending_seconds), 0)::float8 AS pending_age_p50,
    coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY pending_seconds), 0)::float8 AS pending_age_p99
FROM interrupt_facts
WHERE tenant_id = @tenant_id AND created_at >= @from_time AND created_at < @to_time
GROUP BY 1
ORDER BY 1;
