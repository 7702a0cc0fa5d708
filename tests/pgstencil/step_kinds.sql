-- Statements whose expressions have the step kinds (executor/execExpr.h's
-- ExprEvalOp) the corpus (corpus.py) reaches rarely or never: each line
-- after "-- queries" must give jit off's outcome under pgstencil and llvmjit.
-- The comment after a query names the steps it is there for.
-- setup
CREATE TYPE pair AS (x int, y text)
CREATE DOMAIN posint AS int NOT NULL CHECK (VALUE > 0)
CREATE TABLE k (id int PRIMARY KEY, arr int[], p pair, j jsonb, x xml, v posint)
INSERT INTO k SELECT i, ARRAY[i, i * 2, NULL], ROW(i, 'p' || i)::pair, jsonb_build_object('a', i, 'b', ARRAY[i, i + 1]), ('<r n="' || i || '"/>')::xml, i FROM generate_series(1, 50) i
INSERT INTO k VALUES (51, NULL, NULL, NULL, NULL, 51)
CREATE SEQUENCE seq
CREATE TABLE k2 (LIKE k)
CREATE FUNCTION plpg(n int) RETURNS int LANGUAGE plpgsql AS $$ DECLARE s int := 0; BEGIN FOR i IN 1..n LOOP s := s + i * n; END LOOP; RETURN s; END $$
CREATE TABLE par (a int, b text)
CREATE TABLE chi (c int) INHERITS (par)
INSERT INTO chi SELECT i, 'c' || i, i * 10 FROM generate_series(1, 20) i
CREATE FUNCTION sqlf(n int) RETURNS int LANGUAGE sql AS $$ SELECT n * 3 $$
-- queries
SELECT id, arr[2], arr[1:2], arr[id % 3 + 1] FROM k ORDER BY id -- SBSREF_SUBSCRIPTS, SBSREF_FETCH
SELECT id, (arr || 7)[4], array_length(arr, 1) FROM k ORDER BY id -- FUNCEXPR with arrays
UPDATE k2 SET arr[2] = 99 WHERE id < 0 -- SBSREF_OLD, SBSREF_ASSIGN (no row)
SELECT id, j['a'], j['b'][1] FROM k ORDER BY id -- jsonb subscripting (SBSREF via its own methods)
SELECT id, ARRAY[id, id + 1], ARRAY[[id], [2]] FROM k ORDER BY id -- ARRAYEXPR
SELECT id, arr::text[], arr::numeric[] FROM k ORDER BY id -- ARRAYCOERCE
SELECT id, ROW(id, 'a'), (p).x, (p).y FROM k ORDER BY id -- ROW, FIELDSELECT
SELECT id, p IS NULL, p IS NOT NULL, ROW(id, NULL) IS NULL FROM k ORDER BY id -- NULLTEST_ROWISNULL, ROWISNOTNULL
SELECT k.id, k FROM k ORDER BY id -- WHOLEROW
SELECT id, ctid, xmin = xmin, tableoid::regclass FROM k ORDER BY id -- SCAN_SYSVAR
SELECT id, greatest(id, 20, NULL), least(id, 10) FROM k ORDER BY id -- MINMAX
SELECT id, id IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12), id = ANY (arr), id <> ALL (ARRAY[1, 2]) FROM k ORDER BY id -- HASHED_SCALARARRAYOP, SCALARARRAYOP
SELECT id, (id, 'a') < (3, 'b'), (id, id) >= (20, NULL) FROM k ORDER BY id -- ROWCOMPARE_STEP, ROWCOMPARE_FINAL
SELECT id, current_user = current_user, current_date - current_date, session_user IS NOT NULL FROM k ORDER BY id -- SQLVALUEFUNCTION
SELECT count(nextval('seq')) > 0 FROM k -- NEXTVALUEEXPR (via nextval: FUNCEXPR)
SELECT id, xmlelement(name e, id), xmlconcat(x, x) FROM k ORDER BY id -- XMLEXPR
SELECT id, (v + 1)::posint FROM k ORDER BY id -- DOMAIN_TESTVAL, DOMAIN_NOTNULL, DOMAIN_CHECK
SELECT (id - 60)::posint FROM k ORDER BY id -- DOMAIN_CHECK failing
SELECT NULL::posint -- DOMAIN_NOTNULL failing
SELECT id, (p).x + 1, row_to_json(p) FROM k ORDER BY id -- FIELDSELECT
UPDATE k2 SET p.x = 5 WHERE id < 0 -- FIELDSTORE_DEFORM, FIELDSTORE_FORM (no row)
SELECT p FROM par p ORDER BY a -- CONVERT_ROWTYPE (a child's whole row as its parent's)
SELECT a % 3, GROUPING(a % 3), count(*) FROM (SELECT id AS a FROM k) s GROUP BY ROLLUP (a % 3) ORDER BY 1, 2 -- GROUPING_FUNC
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY id), mode() WITHIN GROUP (ORDER BY id % 4) FROM k -- AGG_ORDERED_TRANS_DATUM
SELECT string_agg(DISTINCT (id % 5)::text, ',' ORDER BY (id % 5)::text), array_agg(id ORDER BY id DESC) FROM k -- AGG_ORDERED_TRANS_TUPLE
SELECT count(*), sum(id), avg(id), max(p::text), array_agg(id) FILTER (WHERE id > 45) FROM k -- AGG_PLAIN_TRANS_* by value and by reference
SELECT id % 4, count(DISTINCT id % 3), sum(id) FILTER (WHERE id % 2 = 0) FROM k GROUP BY GROUPING SETS ((id % 4), ()) ORDER BY 1, 2 -- AGG_PLAIN_PERGROUP_NULLCHECK, INPUT_CHECK
SELECT id, sum(id) OVER w, rank() OVER w, lead(id, 2) OVER w FROM k WINDOW w AS (ORDER BY id) ORDER BY id -- WINDOW_FUNC
SELECT id, (SELECT max(id) FROM k k3 WHERE k3.id < k.id), EXISTS (SELECT 1 FROM k k4 WHERE k4.id = k.id * 2) FROM k ORDER BY id -- SUBPLAN, PARAM_EXEC
SELECT plpg(id) FROM k ORDER BY id -- PARAM_CALLBACK (PL/pgSQL's expressions)
SELECT sqlf(id) FROM k ORDER BY id -- SQL function, inlined
SELECT id, CASE id % 3 WHEN 0 THEN 'a' WHEN 1 THEN 'b' END, CASE WHEN id > 10 THEN id END FROM k ORDER BY id -- CASE_TESTVAL, JUMP_IF_NOT_TRUE
SELECT id, id::text::int, ('0' || id)::int8, p::text::pair FROM k ORDER BY id -- IOCOERCE
SELECT id, id IS DISTINCT FROM NULLIF(id, 3), p IS NOT DISTINCT FROM p FROM k ORDER BY id -- DISTINCT, NOT_DISTINCT, NULLIF
SELECT id, NULLIF(arr, ARRAY[1, 2, NULL]) FROM k ORDER BY id -- NULLIF with an array
SELECT id, (id > 10) IS TRUE, (NULLIF(id, 5) > 3) IS NOT FALSE, (p IS NULL) IS UNKNOWN FROM k ORDER BY id -- BOOLTEST_*
SELECT jsonb_path_query_array(j, '$.b[*] ? (@ > 3)') FROM k ORDER BY id -- FUNCEXPR over jsonb
SELECT k.id, k2.id FROM k LEFT JOIN k2 ON k.id = k2.id ORDER BY 1 -- OUTER_VAR, INNER_VAR, ASSIGN_*_VAR in joins
SELECT x.id, y.id FROM k x JOIN k y ON x.id = y.id % 10 AND x.arr[1] < y.id ORDER BY 1, 2 -- hash join quals on both slots
INSERT INTO k2 SELECT * FROM k WHERE id > 48 RETURNING id, v + 1 -- INSERT ... RETURNING (run once per mode: its rows are the same each time)
WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 40) SELECT sum(n), max(n * n) FROM r -- a recursive CTE's working table
SELECT id / (id - 25) FROM k ORDER BY id -- division by zero in a projection
SELECT (id * 100000000)::int4 FROM k ORDER BY id -- integer out of range in a cast
SELECT ('x' || id)::int FROM k -- invalid input syntax
