-- A verdict `v` as the service's judge path writes it (lineage/claims/verify.py for claims,
-- lineage/claims/handoffs.py for statements): its transform and a word of its vocabulary.
-- Any other record of kind verdict (one appended by hand, before the append routes refused
-- the kind) is never current, never counted and never shown.
      AND ((v.attributes ->> 'check' = 'claim' AND v.transform = 'verify_claims'
            AND v.attributes ->> 'verdict'
                IN ('uncited', 'hallucinated_id', 'unsupported', 'supported', 'unknown'))
        OR (v.attributes ->> 'check' = 'statement' AND v.transform = 'verify_statements'
            AND v.attributes ->> 'verdict'
                IN ('supported', 'unsupported', 'cross_source_merge', 'unknown')))
