-- name: CountInterruptsByStatus :many
SELECT status, count(*) AS total
FROM interrupts
WHERE tenant_id = @tenant_id
GROUP BY status
ORDER BY status;
