/*-------------------------------------------------------------------------
 *
 * sqlstate.c
 *		Lists of SQLSTATEs and SQLSTATE classes, as occ.retry's retry_on
 *		argument and the occ.retry_sqlstates setting take them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "pg_occ.h"
#include "util/util.h"

/*
 * occ_parse_sqlstate: a 5-character SQLSTATE or a 2-character class, digits
 * and letters (either case), spaces around it ignored.  Returns false if s
 * is neither.
 */
static bool
occ_parse_sqlstate(const char *s, int *code, bool *is_class)
{
	size_t		len;
	char		c[5] = {'0', '0', '0', '0', '0'};

	/* list items may be padded, as in "40001, 40P01" */
	while (*s == ' ')
		s++;
	len = strlen(s);
	while (len > 0 && s[len - 1] == ' ')
		len--;

	if (len != 2 && len != 5)
		return false;
	for (size_t i = 0; i < len; i++)
	{
		c[i] = pg_toupper((unsigned char) s[i]);
		if (!((c[i] >= '0' && c[i] <= '9') || (c[i] >= 'A' && c[i] <= 'Z')))
			return false;
	}
	*is_class = (len == 2);
	*code = MAKE_SQLSTATE(c[0], c[1], c[2], c[3], c[4]);
	return true;
}

/*
 * occ_parse_sqlstates: parse a list of SQLSTATEs and classes (C strings, NULL
 * allowed and refused) into out, which has room for all of them.  On a
 * problem, *bad is the offending item.  Shared by the retry_on argument and
 * the check hook of occ.retry_sqlstates.
 */
OccSqlstatesProblem
occ_parse_sqlstates(List *items, OccSqlstates *out, const char **bad)
{
	ListCell   *lc;

	out->n = 0;
	foreach(lc, items)
	{
		OccSqlstate *item = &out->items[out->n];

		*bad = lfirst(lc);
		if (*bad == NULL || !occ_parse_sqlstate(*bad, &item->code, &item->is_class))
			return OCC_SQLSTATES_INVALID;
		if (!item->is_class && item->code == ERRCODE_QUERY_CANCELED)
			return OCC_SQLSTATES_CANCEL;
		out->n++;
	}
	return OCC_SQLSTATES_OK;
}

/*
 * occ_sqlstates_match: is sqlerrcode in the list, as a code or by its
 * class?  A cancel (57014) never is: it always ends occ.retry.
 */
bool
occ_sqlstates_match(const OccSqlstates *list, int sqlerrcode)
{
	if (sqlerrcode == ERRCODE_QUERY_CANCELED)
		return false;
	for (int i = 0; i < list->n; i++)
	{
		const OccSqlstate *item = &list->items[i];

		if (item->is_class ?
			ERRCODE_TO_CATEGORY(sqlerrcode) == item->code :
			sqlerrcode == item->code)
			return true;
	}
	return false;
}
